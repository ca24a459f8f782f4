//! The copy aside of an in-place rewrite (see [`inplace`](super::inplace)): its header (which
//! file and which versions it belongs to), reading it back over the file, and what the next
//! daemon does with a copy a dead one left ([`recover`]). Below both the rewrite, which makes
//! copies, and the cleaning of leftovers (see [`leftovers`](super::leftovers)), which uses them.

use std::ffi::OsStr;
use std::fs::File;
use std::io::ErrorKind;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::time::{Duration, Instant};

use fs2::FileExt as _;
use rustix::fs::{AtFlags, Mode, OFlags};

use super::Version;

/// Bytes of a copy's header; the old content follows it.
pub(super) const HEADER_BYTES: u64 = 1024;

/// The first line of a copy's header (its format's version is the number).
const MAGIC: &str = "filectx in-place copy 1";

/// Bytes moved at once between the file and its copy.
const CHUNK: usize = 64 * 1024;

/// What a copy says it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Header {
    /// The device of the file rewritten.
    pub(super) dev: u64,
    /// Its inode.
    pub(super) ino: u64,
    /// Its name in the folder.
    pub(super) name: Vec<u8>,
    /// The old content's length (the copy holds it).
    pub(super) old_len: u64,
    /// The old content's version.
    pub(super) old: Version,
    /// The new content's length.
    pub(super) new_len: u64,
    /// The new content's version.
    pub(super) new: Version,
}

impl Header {
    /// The header as written: lines of text, padded with newlines to [`HEADER_BYTES`].
    pub(super) fn encode(&self) -> Vec<u8> {
        let name: String = self.name.iter().map(|b| format!("{b:02x}")).collect();
        let text = format!(
            "{MAGIC}\ndev={}\nino={}\nname={name}\nold={}:{}\nnew={}:{}\nend\n",
            self.dev, self.ino, self.old_len, self.old, self.new_len, self.new
        );
        let mut bytes = text.into_bytes();
        bytes.resize(HEADER_BYTES as usize, b'\n');
        bytes
    }

    /// The header read back; `None` for anything else (a copy whose header was never written).
    pub(super) fn decode(bytes: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.lines();
        if lines.next()? != MAGIC {
            return None;
        }
        let mut field = |key: &str| lines.next()?.strip_prefix(key)?.strip_prefix('=').map(str::to_owned);
        let dev = field("dev")?.parse().ok()?;
        let ino = field("ino")?.parse().ok()?;
        let hex = field("name")?;
        let version = |text: String| -> Option<(u64, Version)> {
            let (len, hash) = text.split_once(':')?;
            Some((len.parse().ok()?, Version::parse(hash)?))
        };
        let (old_len, old) = version(field("old")?)?;
        let (new_len, new) = version(field("new")?)?;
        if lines.next()? != "end" || hex.len() % 2 != 0 || hex.is_empty() || hex.len() > 2 * 255 {
            return None;
        }
        let name = (0..hex.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(hex.get(at..at + 2)?, 16).ok())
            .collect::<Option<Vec<u8>>>()?;
        Some(Self { dev, ino, name, old_len, old, new_len, new })
    }
}

/// Reads `file` from `from` to its end (at most `limit` bytes) in chunks, handing each to
/// `each` with its offset; returns how many bytes there were.
pub(super) fn each_chunk(
    file: &File,
    from: u64,
    limit: u64,
    each: &mut dyn FnMut(&[u8], u64) -> std::io::Result<()>,
) -> std::io::Result<u64> {
    let mut buf = vec![0u8; CHUNK];
    let mut done = 0u64;
    loop {
        let n = match file.read_at(&mut buf, from + done) {
            Ok(0) => return Ok(done),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if done + n as u64 > limit {
            return Err(std::io::Error::new(ErrorKind::FileTooLarge, "longer than it may be"));
        }
        each(&buf[..n], done)?;
        done += n as u64;
    }
}

/// The version of `file`'s bytes from `from` to its end (at most `limit`), and their length.
pub(super) fn version_from(file: &File, from: u64, limit: u64) -> std::io::Result<(Version, u64)> {
    let mut hasher = blake3::Hasher::new();
    let len = each_chunk(file, from, limit, &mut |chunk, _| {
        hasher.update(chunk);
        Ok(())
    })?;
    Ok((Version::from_hash(hasher.finalize()), len))
}

/// Writes the copy's old content (after its header) back over `file`, and gives the file that
/// length again: the old content, whatever part of the new one had been written.
pub(super) fn put_back(copy: &File, file: &File, old_len: u64, sync: bool) -> std::io::Result<()> {
    each_chunk(copy, HEADER_BYTES, old_len, &mut |chunk, at| file.write_all_at(chunk, at))?;
    file.set_len(old_len)?;
    if sync {
        file.sync_data()?;
    }
    Ok(())
}

/// What became of a dead daemon's copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Recovered {
    /// The file was torn: its old content is back (the file's name), and the copy is gone.
    Restored(String),
    /// The copy was removed, nothing else touched: why.
    Removed(&'static str),
    /// The copy was left where it is: why.
    Kept(&'static str),
}

/// Uses the copy `name` in `dir`, left by a daemon that died rewriting a file in place: under
/// the file's lock (waiting at most `patience`), puts the old content back when the file is
/// the very inode the copy names and holds neither its old nor its new version, no longer than
/// the longer of the two; removes the copy when it is no longer needed (the file is whole, or
/// the copy itself is incomplete: the file was not touched before it was complete). A copy
/// whose file is gone or is another inode now is kept, for a person to look at.
pub(super) fn recover(dir: &OwnedFd, name: &str, patience: Duration) -> std::io::Result<Recovered> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let copy = File::from(rustix::fs::openat(dir, name, flags, Mode::empty())?);
    let copy_meta = copy.metadata()?;
    let remove = |why| -> std::io::Result<Recovered> {
        rustix::fs::unlinkat(dir, name, AtFlags::empty())?;
        Ok(Recovered::Removed(why))
    };
    let mut head = vec![0u8; HEADER_BYTES as usize];
    let header = match copy.read_exact_at(&mut head, 0) {
        Ok(()) => Header::decode(&head),
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => None,
        Err(e) => return Err(e),
    };
    let Some(header) = header else {
        return remove("its header was never written: the file was not touched");
    };
    if copy_meta.len() != HEADER_BYTES + header.old_len
        || version_from(&copy, HEADER_BYTES, header.old_len)?.0 != header.old
    {
        return remove("it is incomplete: the file was not touched");
    }
    let target_name = OsStr::from_bytes(&header.name);
    if !super::beneath::is_plain_name(target_name) {
        return Ok(Recovered::Kept("it names no file of this folder"));
    }
    let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(dir, target_name, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(rustix::io::Errno::NOENT) => return Ok(Recovered::Kept("its file is gone")),
        Err(e) => return Err(e.into()),
    };
    let meta = file.metadata()?;
    if !meta.is_file() || (meta.dev(), meta.ino()) != (header.dev, header.ino) {
        return Ok(Recovered::Kept("its file's name is another file now"));
    }
    // The lock every write of this family takes: no daemon writes the file meanwhile.
    let deadline = Instant::now() + patience;
    while file.try_lock_exclusive().is_err() {
        if Instant::now() >= deadline {
            return Ok(Recovered::Kept("its file's lock stayed taken"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // Another daemon may have used the copy while this one waited for the lock.
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) if stat.st_ino == copy_meta.ino() => {}
        _ => return Ok(Recovered::Removed("another daemon used it first")),
    }
    let limit = header.old_len.max(header.new_len);
    if file.metadata()?.len() > limit {
        return remove("its file was changed since (it is longer than either version)");
    }
    let (now, _) = version_from(&file, 0, limit)?;
    if now == header.old || now == header.new {
        return remove("its file holds a whole version");
    }
    put_back(&copy, &file, header.old_len, true)?;
    rustix::fs::unlinkat(dir, name, AtFlags::empty())?;
    Ok(Recovered::Restored(target_name.to_string_lossy().into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_reads_back_as_written_and_nothing_else_reads_as_one() {
        let header = Header {
            dev: 2049,
            ino: 1 << 40,
            name: "naïve name.txt".as_bytes().to_vec(),
            old_len: 10,
            old: Version::of(b"old"),
            new_len: 1 << 33,
            new: Version::of(b"new"),
        };
        let bytes = header.encode();
        assert_eq!(bytes.len() as u64, HEADER_BYTES);
        assert_eq!(Header::decode(&bytes), Some(header.clone()));
        assert_eq!(Header::decode(&vec![0u8; HEADER_BYTES as usize]), None, "never written");
        let cut = String::from_utf8(bytes).unwrap().replace("\nend\n", "\n");
        assert_eq!(Header::decode(cut.as_bytes()), None, "no end line");
        let long = Header { name: vec![b'x'; 256], ..header };
        assert_eq!(Header::decode(&long.encode()), None, "a name longer than a file name may be");
    }
}
