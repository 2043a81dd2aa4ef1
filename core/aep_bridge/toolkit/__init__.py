"""The channel toolkit: what every platform channel needs, written once."""
