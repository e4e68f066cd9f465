"""Node-agent exporters of the sharing ledger: Prometheus metrics, OpenTelemetry spans."""
