"""The web dashboard: status, agents, memory settings and browser, a person's ``/me``, and
``/healthz`` and ``/metrics``."""
