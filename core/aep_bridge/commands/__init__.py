"""What the `aep-bridge` commands run beyond the loop: `setup` (and the doctor checks it
shares), `preview` (the real bridge over a recording) and its config, `demo` and `ask` (a
scripted and a tiny agent), `audit` (the trail exported); `simtime`, the simulated clock
`preview` replays on. The command line itself is `cli/`."""
