"""The channel contract: what a channel plugin implements (`ChannelAdapter`, its types, the
hooks, the setup wizard, the preview dialect) and what the core gives it back (signed
presses, blocks drawn as HTML), and how the core finds and loads plugins. A channel reaches
these names through `aep_bridge`, never through this package's paths."""
