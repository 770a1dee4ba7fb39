"""Command-line clients: ``tcloud`` (users) and ``tacc-hub`` (the service and admin tasks)."""
