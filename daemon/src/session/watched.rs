//! How a session meets the watcher, which names no session: the session is the [`StaleSink`]
//! it registers with the [`WatchHub`], and the hub is the [`ObservationHub`] its owners report
//! what they observe to.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use filectx_protocol::FileDidChange;
use filectx_protocol::methods::FILE_DID_CHANGE;

use crate::context::{ObservationSink, Root};
use crate::session::Session;
use crate::session::owners::ObservationHub;
use crate::watch::{Recorded, StaleSink, WatchHub};

impl StaleSink for Session {
    fn roots(&self) -> Option<Vec<Root>> {
        self.options().map(|o| o.roots.clone())
    }

    fn cwd(&self) -> PathBuf {
        self.options().map(|o| o.cwd.clone()).unwrap_or_default()
    }

    fn recorded(&self, owner: Option<&str>, path: &Path) -> Recorded {
        let Some(owner) = self.owners().find(owner) else { return Recorded::Nothing };
        if owner.observations().is_writing(path) {
            return Recorded::Writing;
        }
        owner
            .observations()
            .peek(path)
            .map_or(Recorded::Nothing, |(version, links)| Recorded::Version(version, links))
    }

    fn stale(&self, change: &FileDidChange) {
        self.notify(FILE_DID_CHANGE, change);
    }
}

impl ObservationHub for WatchHub {
    fn sink_for(self: Arc<Self>, session: &str, owner: Option<&str>) -> Arc<dyn ObservationSink> {
        self.owner_sink(session, owner)
    }

    fn session_ended(&self, session: &str) {
        self.unregister(session);
    }
}
