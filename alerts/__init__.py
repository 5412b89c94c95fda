"""Alerts in: Prometheus Alertmanager and Grafana alerts open HAL incidents (issue 46)."""
