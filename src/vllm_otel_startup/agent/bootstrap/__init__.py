"""What runs at interpreter start, before any agent package: OpenTelemetry's distro and configurator for this
process (or none, in a helper), the environment repair, and our settings as ``opentelemetry-instrument`` options."""
