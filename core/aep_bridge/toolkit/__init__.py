"""The channel toolkit: the pieces every chat channel needs, public through `aep_bridge`."""
