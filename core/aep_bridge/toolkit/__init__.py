"""The channel toolkit: the pieces every platform channel needs, public through `aep_bridge`."""
