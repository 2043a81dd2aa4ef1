"""The configuration: the model and how it is loaded (`config.py`), its errors in plain words,
writing a channel's block into it, the `.env` file beside it, and `people` (who is who across
channels), which the model holds."""
