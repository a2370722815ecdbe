//! The request path from raw bytes to an open file, as the fuzz target
//! (`crates/serve/fuzz`) and the corpus test (`tests/fuzz_corpus.rs`) drive it.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::http::{self, Parsed};
use crate::root::{decode_target, Root};

/// Every status the request path may produce (0: the request is incomplete).
pub const STATUSES: &[u16] = &[0, 200, 400, 403, 404, 405, 431, 505];

/// Fills `dir` with the fixture: a document root `dir/root` holding files, a directory with an
/// index, and symlinks pointing inside, outside (absolute) and up (relative); a secret outside.
pub fn populate(dir: &Path) -> std::io::Result<Root> {
    let root = dir.join("root");
    let outside = dir.join("outside");
    std::fs::create_dir_all(root.join("sub"))?;
    std::fs::create_dir_all(&outside)?;
    std::fs::write(outside.join("secret"), b"secret")?;
    std::fs::write(root.join("a.txt"), b"hello")?;
    std::fs::write(root.join("sub/index.html"), b"<p>")?;
    for (link, to) in [
        ("out", outside.clone()),
        ("up", PathBuf::from("../..")),
        ("inside", PathBuf::from("a.txt")),
    ] {
        let l = root.join(link);
        if l.symlink_metadata().is_err() {
            std::os::unix::fs::symlink(to, l)?;
        }
    }
    Root::new(&root)
}

/// A fixture root in the temp directory, made once per process (for the fuzz target).
pub fn root() -> &'static Root {
    static ROOT: OnceLock<Root> = OnceLock::new();
    ROOT.get_or_init(|| {
        populate(&std::env::temp_dir().join("schedlab-fuzz-fixture")).expect("fixture root")
    })
}

/// Parses `data` and resolves its target; returns the status and, for 200, the real path of
/// the file that was opened (read back from /proc/self/fd).
pub fn request_path(root: &Root, data: &[u8], max_header: usize) -> (u16, Option<PathBuf>) {
    match http::parse(data, max_header) {
        Parsed::Partial => (0, None),
        Parsed::Error(s) => (s, None),
        Parsed::Complete(req) => match decode_target(&req.target) {
            Err(d) => (d.status(), None),
            Ok(rel) => match root.open(&rel) {
                Err(d) => (d.status(), None),
                Ok((file, _, _)) => {
                    let link = format!("/proc/self/fd/{}", file.as_raw_fd());
                    (200, std::fs::read_link(link).ok())
                }
            },
        },
    }
}

/// The invariants: a known status, and any file opened lies beneath the root.
pub fn check(root: &Root, data: &[u8]) -> u16 {
    let (status, path) = request_path(root, data, 8192);
    assert!(STATUSES.contains(&status), "status {status} for {data:?}");
    if status == 200 {
        let path = path.expect("an opened file has a path");
        assert!(
            path.starts_with(root.path()),
            "{} is outside {} for {:?}",
            path.display(),
            root.path().display(),
            String::from_utf8_lossy(data)
        );
    }
    status
}
