"""The service: REST API, log streams, and the controller that wires the layers. Nothing imports it."""
