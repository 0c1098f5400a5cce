//! What the extractor must refuse, and the limits it holds packages to.

use super::*;

// ---- names ----

#[test]
fn dotdot_names_are_refused() {
    for name in ["../escaped", "docs/../../escaped", ".."] {
        assert_eq!(
            refused(&package_with(name)),
            format!(
                "archive entry {name:?} is not allowed: the name has a \"..\" component, \
                 which would point outside the package directory"
            )
        );
    }
}

#[test]
fn absolute_names_are_refused() {
    let scratch_target = tempfile::tempdir().unwrap();
    let target = scratch_target.path().join("escaped");
    let target = target.to_str().unwrap();
    for name in [target, "/escaped", "C:/escaped", "c:escaped"] {
        assert_eq!(
            refused(&package_with(name)),
            format!("archive entry {name:?} is not allowed: the name is an absolute path")
        );
    }
    assert!(!Path::new(target).exists());
}

#[test]
fn backslash_names_are_refused() {
    for name in ["..\\escaped", "docs\\a.md", "\\escaped"] {
        assert_eq!(
            refused(&package_with(name)),
            format!(
                "archive entry {name:?} is not allowed: the name contains a backslash, \
                 which Windows treats as a path separator"
            )
        );
    }
}

#[test]
fn colon_names_are_refused() {
    assert_eq!(
        refused(&package_with("README:stream")),
        "archive entry \"README:stream\" is not allowed: the name contains ':', \
         which Windows treats as a drive or stream separator"
    );
}

#[test]
fn empty_and_dot_components_are_refused() {
    for name in ["docs//a.md", "./README", "docs/./a.md", "docs//"] {
        assert_eq!(
            refused(&package_with(name)),
            format!(
                "archive entry {name:?} is not allowed: the name has an empty or \".\" path component"
            )
        );
    }
}

#[test]
fn empty_name_is_refused() {
    assert_eq!(
        refused(&package_with("")),
        "archive entry \"\" is not allowed: the name is empty"
    );
}

#[test]
fn nul_names_are_refused() {
    let mut archive = package_with("nul-X.txt");
    assert_eq!(replace_all(&mut archive, b"nul-X", b"nul-\0"), 2);
    assert_eq!(
        refused(&archive),
        "archive entry \"nul-\\0.txt\" is not allowed: the name contains a NUL byte"
    );
}

#[test]
fn non_utf8_names_are_refused() {
    let mut archive = package_with("bad-X.txt");
    assert_eq!(replace_all(&mut archive, b"bad-X", b"bad-\xff"), 2);
    assert_eq!(
        refused(&archive),
        "archive entry \"bad-\u{fffd}.txt\" is not allowed: the name is not valid UTF-8"
    );
}

#[test]
fn over_long_names_are_refused() {
    let component = "c".repeat(256);
    assert_eq!(
        refused(&package_with(&format!("docs/{component}"))),
        format!(
            "archive entry \"docs/{component}\" is not allowed: a path component is longer than 255 bytes"
        )
    );
    let long_path = vec!["d".repeat(200); 21].join("/");
    assert_eq!(
        refused(&package_with(&long_path)),
        format!("archive entry {long_path:?} is not allowed: the name is longer than 4096 bytes")
    );
}

// ---- duplicates and collisions ----

#[test]
fn exact_duplicate_names_are_refused() {
    let mut archive = build(|w| {
        add_exe(w);
        add(w, "a.txt", b"first", options());
        add(w, "b.txt", b"second", options());
    });
    assert_eq!(replace_all(&mut archive, b"b.txt", b"a.txt"), 2);
    assert_eq!(
        refused(&archive),
        "package archive has more than one entry with the same name"
    );
}

#[test]
fn case_duplicate_names_are_refused() {
    let archive = build(|w| {
        add_exe(w);
        add(w, "README", b"upper", options());
        add(w, "readme", b"lower", options());
    });
    assert_eq!(
        refused(&archive),
        "archive entries \"README\" and \"readme\" have paths that differ only in letter case; \
         they would collide on case-insensitive file systems such as those of macOS and Windows"
    );
    let archive = build(|w| {
        add_exe(w);
        add(w, "Docs/a.md", b"a", options());
        add(w, "docs/b.md", b"b", options());
    });
    assert!(
        refused(&archive).starts_with("archive entries \"Docs/a.md\" and \"docs/b.md\" have paths")
    );
}

#[test]
fn file_and_directory_with_one_name_are_refused() {
    let archive = build(|w| {
        add_exe(w);
        add(w, "docs", b"file", options());
        w.add_directory("docs/", options()).unwrap();
    });
    assert_eq!(
        refused(&archive),
        "archive entries \"docs\" and \"docs/\" would both be written to the same path"
    );
    for files_first in [true, false] {
        let archive = build(|w| {
            add_exe(w);
            if files_first {
                add(w, "docs", b"file", options());
                add(w, "docs/a.md", b"a", options());
            } else {
                add(w, "docs/a.md", b"a", options());
                add(w, "docs", b"file", options());
            }
        });
        assert_eq!(
            refused(&archive),
            "archive entry \"docs/a.md\" needs \"docs\" to be a directory, \
             but the archive also has a file named \"docs\""
        );
    }
}

#[test]
fn mismatched_local_and_central_names_are_refused() {
    let mut archive = package_with("README.txt");
    let local = find(&archive, b"README.txt");
    archive[local] = b'X';
    let message = refused(&archive);
    assert!(
        message.ends_with(
            "package.zip is not a valid zip archive: header inconsistency detected: \
             Local file header filename mismatch (does not match central directory)"
        ),
        "{message}"
    );
}

// ---- entry types ----

#[test]
fn symlinks_are_refused() {
    let archive = build(|w| {
        add_exe(w);
        w.add_symlink("link", "/etc/passwd", options()).unwrap();
    });
    assert_eq!(
        refused(&archive),
        "archive entry \"link\" is a symbolic link; provider packages may contain only \
         regular files and directories"
    );
}

#[test]
fn special_files_are_refused() {
    let archive = build(|w| {
        add_exe(w);
        add(
            w,
            "fifo",
            b"",
            options().external_attributes(0o010_644 << 16),
        );
    });
    assert_eq!(
        refused(&archive),
        "archive entry \"fifo\" is a special file (mode 10644); provider packages may \
         contain only regular files and directories"
    );
}

#[test]
fn directories_with_data_are_refused() {
    let archive = build(|w| {
        add_exe(w);
        add(w, "docs/", b"hidden", options());
    });
    assert_eq!(
        refused(&archive),
        "archive entry \"docs/\" is a directory but carries 6 bytes of data"
    );
}

// ---- encodings ----

#[test]
fn unsupported_compression_is_refused() {
    let mut archive = package_with("README");
    let (local, central) = first_headers(&archive);
    set_u16(&mut archive, local + 8, 12);
    set_u16(&mut archive, central + 10, 12);
    assert_eq!(
        refused(&archive),
        format!(
            "archive entry {EXE:?} uses compression method Bzip2; \
             only stored and deflated entries are supported"
        )
    );
}

#[test]
fn encrypted_entries_are_refused() {
    let mut archive = package_with("README");
    let (local, central) = first_headers(&archive);
    archive[local + 6] |= 1;
    archive[central + 8] |= 1;
    assert_eq!(
        refused(&archive),
        format!("archive entry {EXE:?} is encrypted; provider packages cannot be encrypted")
    );
}

// ---- damaged archives ----

#[test]
fn empty_archive_is_refused() {
    let archive = build(|_| {});
    let scratch = Scratch::new();
    let err = scratch.extract(&archive).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("empty archive: {}", scratch.zip_path().display())
    );
    scratch.assert_dest_empty();
}

#[test]
fn truncated_archive_is_refused() {
    let archive = package_with("README");
    for keep in [archive.len() - 10, archive.len() / 2, 0] {
        let message = refused(&archive[..keep]);
        assert!(
            message.contains("is not a valid zip archive: "),
            "{message}"
        );
    }
}

#[test]
fn not_a_zip_is_refused() {
    let message = refused(b"this is not a zip file at all\n");
    assert!(
        message.ends_with("package.zip is not a valid zip archive: Could not find EOCD"),
        "{message}"
    );
}

#[test]
fn missing_archive_is_reported() {
    let scratch = Scratch::new();
    let err = extract_package(
        &scratch.dir.path().join("absent.zip"),
        &scratch.dest(),
        TYPE,
        &ExtractLimits::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string().starts_with("cannot open package archive "),
        "{err}"
    );
}

#[test]
fn corrupt_deflate_data_is_refused() {
    let mut archive = build(add_exe);
    let (local, _) = first_headers(&archive);
    let name_len = usize::from(u16::from_le_bytes([
        archive[local + 26],
        archive[local + 27],
    ]));
    let extra_len = usize::from(u16::from_le_bytes([
        archive[local + 28],
        archive[local + 29],
    ]));
    // 0xff starts a final block of the reserved type 3.
    archive[local + 30 + name_len + extra_len] = 0xff;
    assert_eq!(
        failed_while_writing(&archive, &ExtractLimits::default()),
        format!("archive entry {EXE:?} is corrupt: corrupt deflate stream")
    );
}

#[test]
fn crc_mismatch_is_refused() {
    let mut archive = build(|w| {
        add(
            w,
            EXE,
            EXE_DATA,
            options().compression_method(CompressionMethod::Stored),
        );
    });
    let (local, central) = first_headers(&archive);
    let real = get_u32(&archive, local + 14);
    set_u32(&mut archive, local + 14, real ^ 1);
    set_u32(&mut archive, central + 16, real ^ 1);
    assert_eq!(
        failed_while_writing(&archive, &ExtractLimits::default()),
        format!(
            "archive entry {EXE:?} is corrupt: its CRC-32 is {real:08x} but its header says {:08x}",
            real ^ 1
        )
    );
}

#[test]
fn lying_uncompressed_size_is_refused() {
    let real = EXE_DATA.len() as u32;
    let cases = [
        (
            real - 1,
            "File is larger than its declared uncompressed size".to_owned(),
        ),
        (
            real + 1,
            format!(
                "it inflates to {real} bytes but its header declares {}",
                real + 1
            ),
        ),
    ];
    for (declared, detail) in cases {
        let mut archive = build(add_exe);
        let (local, central) = first_headers(&archive);
        set_u32(&mut archive, local + 22, declared);
        set_u32(&mut archive, central + 24, declared);
        assert_eq!(
            failed_while_writing(&archive, &ExtractLimits::default()),
            format!("archive entry {EXE:?} is corrupt: {detail}")
        );
    }
}

// ---- limits ----

#[test]
fn total_size_limit_is_enforced() {
    let limits = ExtractLimits {
        max_total_bytes: 60,
        ..ExtractLimits::default()
    };
    let archive = build(|w| {
        add_exe(w);
        add(w, "README", README_DATA, options());
    });
    assert_eq!(
        failed_while_writing(&archive, &limits),
        "package unpacks to more than 60 bytes, the limit for one provider package; \
         the archive may be a zip bomb (if the package is genuine, raise the limit with \
         -max-package-size)"
    );
}

#[test]
fn large_entries_unpack_with_the_same_result_and_limits() {
    // Incompressible, so the ratio limit stays out of the way, and not a
    // multiple of the copy buffer, so the last piece is a partial one.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let big: Vec<u8> = (0..PIPELINE_MIN_BYTES + 12_345)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let archive = build(|w| {
        add_exe(w);
        add(w, "big", &big, options());
    });
    let scratch = Scratch::new();
    let files = scratch.extract(&archive).unwrap();
    assert_eq!(
        files[0],
        ExtractedFile {
            name: "big".into(),
            sha256: sha256(&big),
            size: big.len() as u64,
        }
    );
    assert_eq!(fs::read(scratch.dest().join("big")).unwrap(), big);

    let limits = ExtractLimits {
        max_total_bytes: PIPELINE_MIN_BYTES,
        ..ExtractLimits::default()
    };
    assert_eq!(
        failed_while_writing(&archive, &limits),
        format!(
            "package unpacks to more than {PIPELINE_MIN_BYTES} bytes, the limit for one provider package; \
             the archive may be a zip bomb (if the package is genuine, raise the limit with \
             -max-package-size)"
        )
    );
}

/// An "inflater" that hands out `data` as it is, as for a stored entry.
fn stored(data: Vec<u8>) -> impl FnMut(&mut Vec<u8>) -> Result<bool, ExtractError> {
    let mut reader = Cursor::new(data);
    move |buffer| {
        let (filled, at_end) = fill(&mut reader, buffer).unwrap();
        buffer.truncate(filled);
        Ok(!at_end)
    }
}

#[test]
fn the_two_thread_copy_writes_everything_and_stops_on_either_sides_error() {
    let data: Vec<u8> = (0..COPY_BUFFER_BYTES * 5 + 7).map(|i| i as u8).collect();
    let dir = tempfile::tempdir().unwrap();
    let write_err = |source| ExtractError::Write {
        path: dir.path().to_path_buf(),
        source,
    };
    let on_two_threads = |out, mut inflate: &mut dyn FnMut(&mut Vec<u8>) -> _| {
        let output = FileOutput {
            out: Some(out),
            crc32: crc32fast::Hasher::new(),
            sha256: Sha256Lane::new(),
            archive_hash: None,
        };
        copy_on_two_threads(
            output,
            &mut inflate,
            Vec::new(),
            Unpacking::start(),
            &write_err,
        )
    };
    let mut inflate = stored(data.clone());
    let out = File::create(dir.path().join("out")).unwrap();
    let output = on_two_threads(out, &mut inflate).unwrap();
    assert_eq!(output.sha256.finalize(), sha256(&data));
    assert_eq!(output.crc32.finalize(), crc32fast::hash(&data));
    assert_eq!(fs::read(dir.path().join("out")).unwrap(), data);

    // The inflating side fails on its third buffer.
    let mut calls = 0;
    let mut failing = |buffer: &mut Vec<u8>| {
        calls += 1;
        buffer.clear();
        buffer.extend_from_slice(b"piece");
        if calls == 3 {
            return Err(ExtractError::TooLarge { limit: 10 });
        }
        Ok(true)
    };
    let out = File::create(dir.path().join("out2")).unwrap();
    let err = on_two_threads(out, &mut failing).err().unwrap();
    assert!(matches!(err, ExtractError::TooLarge { limit: 10 }), "{err}");

    // The writing side fails: a file opened only for reading.
    let mut inflate = stored(data.clone());
    let read_only = File::open(dir.path().join("out")).unwrap();
    let err = on_two_threads(read_only, &mut inflate).err().unwrap();
    assert!(matches!(err, ExtractError::Write { .. }), "{err}");
}

#[test]
fn entry_count_limit_is_enforced() {
    let limits = ExtractLimits {
        max_entries: 2,
        ..ExtractLimits::default()
    };
    let archive = build(|w| {
        add_exe(w);
        add(w, "a", b"a", options());
        add(w, "b", b"b", options());
    });
    assert_eq!(
        refused_with(&archive, &limits),
        "package archive has 3 entries, more than the limit of 2; \
         if the package is genuine, raise the limit with -max-package-files"
    );
}

#[test]
fn compression_ratio_limit_is_enforced() {
    let zeros = vec![0u8; 8 << 20];
    let archive = build(|w| {
        add_exe(w);
        add(w, "bomb", &zeros, options());
    });
    assert_eq!(
        failed_while_writing(&archive, &ExtractLimits::default()),
        "archive entry \"bomb\" inflates to more than 200 times its compressed size; \
         the archive may be a zip bomb (if the package is genuine, raise the limit with \
         -max-compression-ratio)"
    );
    let small = vec![0u8; 512 << 10];
    let archive = build(|w| {
        add_exe(w);
        add(w, "small", &small, options());
    });
    Scratch::new().extract(&archive).unwrap();
}

// ---- the executable ----

#[test]
fn package_without_executable_is_refused() {
    let archive = build(|w| {
        add(w, "terraform-provider-nullx", b"other provider", options());
        add(w, "docs/terraform-provider-null", b"nested", options());
        w.add_directory("terraform-provider-null_dir/", options())
            .unwrap();
        add(w, "README", README_DATA, options());
    });
    assert_eq!(
        refused(&archive),
        "provider binary not found: could not find executable file starting with \
         terraform-provider-null"
    );
}

#[test]
fn find_executable_follows_terraform_rules() {
    let dir = tempfile::tempdir().unwrap();
    let touch = |name: &str| fs::write(dir.path().join(name), b"").unwrap();
    touch("terraform-provider-nullx");
    fs::create_dir(dir.path().join("terraform-provider-null.d")).unwrap();
    let err = find_executable(dir.path(), TYPE).unwrap_err();
    assert_eq!(
        err.to_string(),
        "provider binary not found: could not find executable file starting with \
         terraform-provider-null"
    );
    touch("terraform-provider-null_v2.0.0_x5");
    assert_eq!(
        find_executable(dir.path(), TYPE).unwrap(),
        dir.path().join("terraform-provider-null_v2.0.0_x5")
    );
    touch("terraform-provider-null.exe");
    assert_eq!(
        find_executable(dir.path(), TYPE).unwrap(),
        dir.path().join("terraform-provider-null.exe")
    );
    std::os::unix::fs::symlink("nowhere", dir.path().join("terraform-provider-null")).unwrap();
    assert_eq!(
        find_executable(dir.path(), TYPE).unwrap(),
        dir.path().join("terraform-provider-null")
    );
}

#[test]
fn find_executable_reports_unreadable_directory() {
    let dir = tempfile::tempdir().unwrap();
    let err = find_executable(&dir.path().join("absent"), TYPE).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("provider binary not found: could not read package directory: "),
        "{err}"
    );
}

// ---- the destination ----

#[test]
fn planted_symlinks_in_dest_are_not_followed() {
    let with_docs = build(|w| {
        add(w, "docs/a.md", b"a", options());
        add_exe(w);
    });
    let exe_only = build(add_exe);
    for (planted, archive) in [("docs", with_docs), (EXE, exe_only)] {
        let scratch = Scratch::new();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), scratch.dest().join(planted)).unwrap();
        let err = scratch.extract(&archive).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "cannot write {}: File exists (os error 17)",
                scratch.dest().join(planted).display()
            )
        );
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}
