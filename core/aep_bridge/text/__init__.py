"""Plain text: measuring and splitting it, what a terminal shows of it, secrets scrubbed out
of it. The ground floor: nothing here imports another core module."""
