//! A process's whole tree, as `/proc` shows it: its descendants (children, grandchildren, and
//! orphans a subreaper took in), their resident memory added up, and killing them all.

use std::collections::HashMap;

/// Every process's parent, from `/proc/*/stat` (a process gone meanwhile is left out).
fn parents() -> HashMap<u32, u32> {
    let mut out = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return out };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // `pid (comm) state ppid …`: the name may hold spaces and parentheses, so the fields
        // start after the last `)`.
        let Some(rest) = stat.rfind(')').map(|at| &stat[at + 1..]) else { continue };
        if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            out.insert(pid, ppid);
        }
    }
    out
}

/// The descendants of `pid` (not itself), parents before their children.
pub fn descendants(pid: u32) -> Vec<u32> {
    let parents = parents();
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&child, &parent) in &parents {
        children.entry(parent).or_default().push(child);
    }
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(next) = todo.pop() {
        for &child in children.get(&next).map(Vec::as_slice).unwrap_or_default() {
            if child != pid && !out.contains(&child) {
                out.push(child);
                todo.push(child);
            }
        }
    }
    out
}

/// Resident bytes of `pid` and all its descendants.
pub fn resident_bytes(pid: u32) -> u64 {
    let page = rustix::param::page_size() as u64;
    std::iter::once(pid)
        .chain(descendants(pid))
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/statm")).ok())
        .filter_map(|statm| statm.split_whitespace().nth(1).and_then(|r| r.parse::<u64>().ok()))
        .map(|pages| pages * page)
        .sum()
}

/// Sends `signal` to every descendant of `pid`.
pub fn signal_descendants(pid: u32, signal: rustix::process::Signal) -> usize {
    let mut sent = 0;
    for child in descendants(pid) {
        if let Some(child) = rustix::process::Pid::from_raw(child as i32)
            && rustix::process::kill_process(child, signal).is_ok()
        {
            sent += 1;
        }
    }
    sent
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_childs_child_is_a_descendant_and_its_memory_counts() {
        let mut child = std::process::Command::new("sh").args(["-c", "sleep 30 & wait"]).spawn().unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let found = loop {
            let found = descendants(pid);
            if !found.is_empty() || std::time::Instant::now() > deadline {
                break found;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(found.len(), 1, "the sleep under the shell");
        assert!(resident_bytes(pid) > resident_bytes(found[0]));
        assert_eq!(signal_descendants(pid, rustix::process::Signal::KILL), 1);
        let _ = child.kill();
        let _ = child.wait();
    }
}
