"""Notifications of task events to their owners, by e-mail and webhooks (docs/notifications.md).

- :mod:`.settings`: what a user may ask for and what the site allows (validated with pydantic);
- :mod:`.urlcheck`: where a webhook may lead (SSRF rules, checked again at every delivery);
- :mod:`.payloads`: what a notification says in each shape (pure functions);
- :mod:`.deliver`: sending one (SMTP, HTTP);
- :mod:`.notifier`: events in, outbox rows, tries with backoff in the background.
"""

from .notifier import Notifier, NotifyConfig
from .settings import SitePolicy

__all__ = ["Notifier", "NotifyConfig", "SitePolicy"]
