"""Where events come from. Today: the embedded AEP endpoint's HTTP ingest (AEP-0003 §3.2)."""
