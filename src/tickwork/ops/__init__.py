"""What operators read and steer beside the job path: the audit trail, the health report,
Prometheus metrics and the settings and variables stored in the database."""
