"""The bridge as a running process: the HTTP server that holds the loop (`server.py`), its
sockets, `listen.json` and how a client finds the bridge, what the run log shows, and the
commands' exit statuses."""
