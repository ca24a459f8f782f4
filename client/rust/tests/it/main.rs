//! The client crate's integration tests, as one test binary (`it`) with one module per area: the
//! library against a fake daemon (`transport`, `stream`), the `filectx` binary (`cli`), the write
//! gate's library and CLI (`gate`, against a fake daemon that speaks the gate wire), autostart
//! against the real `filectxd` (`autostart`), `filectx service` with stand-ins for systemctl
//! (`service`), and an impostor daemon of another user (`impostor`, which runs this binary again as
//! uid 65534 and so needs root: skipped and recorded without it, see `support::skip`); `support`
//! holds the fake daemon and the helpers they share. The tests share this process: none may change
//! the environment, current folder or umask of the process (children get theirs through `Command`),
//! and files a child executes are written by `sh` or `cp`, never from here.

mod autostart;
mod cli;
mod features;
mod gate;
mod impostor;
mod service;
mod stream;
mod support;
mod transport;
