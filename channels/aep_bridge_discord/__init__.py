"""The Discord channel: each agent session a thread, each question a card with buttons.

Being built (issue 17): so far only its dialect, `markdown` (the message model as Discord
markdown, agent text escaped, measured as Discord counts a message). Nothing is registered
yet: the adapter, its config and its entry point come with the rest of the channel.
"""
