//! Hands back the code pages that only startup touched: the second audited `unsafe`,
//! `madvise(MADV_DONTNEED)` on clean, read-only file mappings of the program and its libraries.
#![allow(unsafe_code)]

/// What [`release_startup_code`] gave back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Released {
    /// Mappings whose pages were dropped from the process's page tables.
    pub mappings: usize,
    /// Resident bytes they held before (their `Rss` in `/proc/self/smaps`).
    pub bytes: u64,
}

/// Drops from this process's page tables every resident page of its code objects (the
/// executable and the shared libraries: every file with an executable mapping here) whose
/// mapping is private, not writable and holds no copied-on-write (anonymous) page.
///
/// Starting toolgate runs code that no call runs again (configuration, migrations, schema
/// compilation, the routers), and the kernel maps code 64 KiB around each page fault, so an
/// idle server would keep about half of its binary resident. Such pages are exact copies of
/// the file (clean page cache): after this, the next access maps the same page again (a minor
/// fault), so only the code that calls run becomes resident again. Nothing is lost or changed;
/// the pages stay in the page cache.
///
/// Mappings that hold anonymous pages (the relocated RELRO segment, written by the dynamic
/// loader before `main`) or may be written (`.data`, `.bss`) are never touched: their contents
/// differ from the file.
pub fn release_startup_code() -> Result<Released, String> {
    let smaps = std::fs::read_to_string("/proc/self/smaps")
        .map_err(|e| format!("cannot read /proc/self/smaps: {e}"))?;
    let mut released = Released::default();
    for m in releasable(&parse_smaps(&smaps)) {
        let len = m.end - m.start;
        // SAFETY: the range is one whole mapping of a code file that is private, not writable
        // and holds no anonymous (copied-on-write) page, so every resident page of it equals
        // the file's page in the page cache. MADV_DONTNEED on a private file mapping drops the
        // page table entries; the next access faults the same file page in again. No Rust
        // object lives in such a mapping and no reference into it is invalidated: code and
        // read-only data read afterwards read the same bytes. The kernel drops such clean pages
        // on its own under memory pressure, so this adds no new way for one to be read again.
        // Between reading smaps and this call the range must still be that mapping: toolgate
        // never unloads a library (and glibc keeps the NSS modules it loads), so no code
        // mapping goes away and nothing else can be mapped in its place.
        let rc = unsafe {
            libc::madvise(
                m.start as usize as *mut libc::c_void,
                len as usize,
                libc::MADV_DONTNEED,
            )
        };
        if rc != 0 {
            return Err(format!(
                "madvise(MADV_DONTNEED) of {} at {:#x}: {}",
                m.path,
                m.start,
                std::io::Error::last_os_error()
            ));
        }
        released.mappings += 1;
        released.bytes += m.rss_kib * 1024;
    }
    Ok(released)
}

/// The mappings [`release_startup_code`] may release: those of code files (a file with an
/// executable mapping here) that [`Mapping::releasable`] accepts.
fn releasable<'m, 't>(mappings: &'m [Mapping<'t>]) -> impl Iterator<Item = &'m Mapping<'t>> {
    let code_files: std::collections::HashSet<&'t str> = mappings
        .iter()
        .filter(|m| m.perms.contains('x') && m.path.starts_with('/'))
        .map(|m| m.path)
        .collect();
    mappings.iter().filter(move |m| m.releasable(&code_files))
}

/// One mapping of `/proc/self/smaps`: the figures [`release_startup_code`] decides on.
#[derive(Debug, PartialEq, Eq)]
struct Mapping<'a> {
    start: u64,
    end: u64,
    perms: &'a str,
    path: &'a str,
    rss_kib: u64,
    /// Pages copied on write (a private mapping's pages that differ from the file). Not
    /// `Private_Dirty`: that also counts the file's own page cache pages not yet written back
    /// (a freshly built binary), which are the file's content all the same.
    anonymous_kib: u64,
}

impl<'a> Mapping<'a> {
    fn releasable(&self, code_files: &std::collections::HashSet<&'a str>) -> bool {
        let private_read_only =
            self.perms.starts_with('r') && !self.perms.contains('w') && self.perms.ends_with('p');
        private_read_only
            && code_files.contains(self.path)
            && self.anonymous_kib == 0
            && self.rss_kib > 0
            && self.end > self.start
    }
}

/// The mappings of a `/proc/PID/smaps` text; a header line starts each one
/// (`start-end perms offset dev inode [path]`), `Key: N kB` lines follow.
fn parse_smaps(text: &str) -> Vec<Mapping<'_>> {
    let mut out: Vec<Mapping<'_>> = Vec::new();
    for line in text.lines() {
        if let Some(mapping) = parse_header(line) {
            out.push(mapping);
            continue;
        }
        let Some(current) = out.last_mut() else {
            continue;
        };
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let kib = || {
            value
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        };
        match key {
            "Rss" => current.rss_kib = kib().unwrap_or(0),
            // An unreadable figure counts as copied pages: such a mapping is left alone.
            "Anonymous" => current.anonymous_kib = kib().unwrap_or(u64::MAX),
            _ => {}
        }
    }
    out
}

fn parse_header(line: &str) -> Option<Mapping<'_>> {
    let mut fields = line.split_ascii_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    let perms = fields.next()?;
    if perms.len() != 4 {
        return None;
    }
    // offset, device, inode; the path is the rest (it may hold spaces), absent for anonymous.
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start();
        rest = rest.split_once(char::is_whitespace).map_or("", |(_, r)| r);
    }
    Some(Mapping {
        start,
        end,
        perms,
        path: rest.trim(),
        rss_kib: 0,
        // Until its figure is read, the mapping counts as holding copied pages.
        anonymous_kib: u64::MAX,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
5581834a0000-5581840a4000 r--p 00000000 fe:00 5310739                    /opt/tg/bin/toolgate
Rss:                3776 kB
Private_Clean:      3776 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
5581840a4000-558186725000 r-xp 00c03000 fe:00 5310739                    /opt/tg/bin/toolgate
Rss:               19252 kB
Private_Dirty:     19252 kB
Anonymous:             0 kB
558186725000-558186884000 r--p 03283000 fe:00 5310739                    /opt/tg/bin/toolgate
Rss:                1404 kB
Private_Dirty:      1404 kB
Anonymous:          1404 kB
558186884000-558186890000 rw-p 033e1000 fe:00 5310739                    /opt/tg/bin/toolgate
Rss:                  48 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
7f0000000000-7f0000100000 r--p 00000000 fe:00 42                         /var/lib/data file.bin
Rss:                 256 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
7f0000200000-7f0000300000 r--s 00000000 fe:00 43                         /usr/lib/libx.so
Rss:                 256 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
7f0000300000-7f0000400000 r-xp 00001000 fe:00 43                         /usr/lib/libx.so
Rss:                 512 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
7f0000400000-7f0000500000 r--p 00000000 00:00 0 
Rss:                   4 kB
Private_Dirty:         0 kB
Anonymous:             4 kB
7f0000500000-7f0000600000 r-xp 00002000 fe:00 44                         /usr/lib/libtorn.so
Rss:                  12 kB
";

    fn released(text: &str) -> Vec<(u64, &str)> {
        let mappings = parse_smaps(text);
        releasable(&mappings).map(|m| (m.start, m.path)).collect()
    }

    #[test]
    fn only_clean_private_read_only_mappings_of_code_files_are_released() {
        assert_eq!(
            released(SMAPS),
            vec![
                (0x5581834a0000, "/opt/tg/bin/toolgate"),
                (0x5581840a4000, "/opt/tg/bin/toolgate"),
                (0x7f0000300000, "/usr/lib/libx.so"),
            ],
            "the code (dirty in the page cache, as a freshly built binary is, but not copied) \
             is released; the relocated RELRO segment (anonymous pages), .data (writable), a data file (no \
             code), a shared mapping, an anonymous mapping and a mapping whose figures are \
             missing are all kept"
        );
    }

    #[test]
    fn paths_with_spaces_and_anonymous_headers_parse() {
        let mappings = parse_smaps(SMAPS);
        assert_eq!(mappings.len(), 9);
        assert_eq!(mappings[4].path, "/var/lib/data file.bin");
        assert_eq!(mappings[7].path, "");
        assert_eq!(mappings[1].rss_kib, 19252);
        assert_eq!(mappings[2].anonymous_kib, 1404);
        assert_eq!(mappings[8].anonymous_kib, u64::MAX);
    }

    #[test]
    fn releasing_keeps_the_program_running_and_lowers_its_resident_code() {
        fn resident_code_kib() -> u64 {
            let text = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
            releasable(&parse_smaps(&text)).map(|m| m.rss_kib).sum()
        }
        let before = resident_code_kib();
        let released = release_startup_code().expect("released");
        assert!(released.mappings > 0, "{released:?}");
        assert!(released.bytes > 0, "{released:?}");
        // Code and read-only data still work after their pages were dropped.
        let words: Vec<String> = (0..1000).map(|i| format!("{i:04}")).collect();
        assert_eq!(words.join("").len(), 4000);
        let after = resident_code_kib();
        assert!(
            after < before,
            "resident code {after} KiB after, {before} KiB before"
        );
    }
}
