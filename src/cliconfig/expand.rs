//! Go standard-library string rules that the CLI config inherits from
//! Terraform: `os.Expand` for `$VAR` references and `filepath.Clean` for
//! `dev_overrides` paths. Matching them keeps a `.terraformrc` meaning the
//! same thing to tfinstall as to Terraform.

/// `os.Expand`: replaces `$NAME` and `${NAME}` using `lookup`. Names are
/// `[A-Za-z0-9_]+`, or one shell-special character (`$1`, `${*}`); a `$`
/// followed by anything else stays as is, and the malformed `${}` / an
/// unclosed `${` are dropped.
pub fn expand_vars(text: &str, mut lookup: impl FnMut(&str) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        if after.is_empty() {
            out.push('$');
            rest = after;
            break;
        }
        let (name, consumed) = shell_name(after);
        match name {
            Some(name) => out.push_str(&lookup(name)),
            None if consumed == 0 => out.push('$'),
            None => {}
        }
        rest = &after[consumed..];
    }
    out.push_str(rest);
    out
}

fn is_shell_special(b: u8) -> bool {
    matches!(
        b,
        b'*' | b'#' | b'$' | b'@' | b'!' | b'?' | b'-' | b'0'..=b'9'
    )
}

/// The variable name at the start of `s` (just after a `$`) and how many
/// bytes the reference occupies.
fn shell_name(s: &str) -> (Option<&str>, usize) {
    let bytes = s.as_bytes();
    if bytes[0] == b'{' {
        if bytes.len() > 2 && is_shell_special(bytes[1]) && bytes[2] == b'}' {
            return (Some(&s[1..2]), 3);
        }
        return match s.find('}') {
            Some(1) => (None, 2),
            Some(close) => (Some(&s[1..close]), close + 1),
            None => (None, 1),
        };
    }
    if is_shell_special(bytes[0]) {
        return (Some(&s[..1]), 1);
    }
    let len = bytes
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
        .count();
    if len == 0 {
        (None, 0)
    } else {
        (Some(&s[..len]), len)
    }
}

/// `filepath.Clean`: the shortest equivalent path, purely lexically — no
/// repeated separators, no `.` elements, `..` folded into its parent where
/// possible, `/..` at the root dropped, no trailing separator, and `.` for
/// an empty result.
pub fn clean_path(path: &str) -> String {
    let sep = std::path::MAIN_SEPARATOR;
    let is_sep = |c: char| c == '/' || c == sep;
    let rooted = path.starts_with(is_sep);
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split(is_sep) {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|last| *last != "..") => {
                parts.pop();
            }
            ".." if rooted => {}
            part => parts.push(part),
        }
    }
    let joined = parts.join(&sep.to_string());
    match (rooted, joined.is_empty()) {
        (true, _) => format!("{sep}{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> String {
        match name {
            "HOME" => "/home/u".into(),
            "1" => "one".into(),
            _ => String::new(),
        }
    }

    #[test]
    fn expands_like_go_os_expand() {
        let cases = [
            ("$HOME/x", "/home/u/x"),
            ("${HOME}x", "/home/ux"),
            ("a$HOME.b", "a/home/u.b"),
            ("$UNSET-x", "-x"),
            ("cost $", "cost $"),
            ("$/x", "$/x"),
            ("${}x", "x"),
            ("${HOME", "HOME"),
            ("$1st", "onest"),
            ("${1}", "one"),
            ("no vars", "no vars"),
            ("é$HOME", "é/home/u"),
        ];
        for (input, want) in cases {
            assert_eq!(expand_vars(input, env), want, "{input:?}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn cleans_like_go_filepath_clean() {
        let cases = [
            ("/tmp/bloop/../boop", "/tmp/boop"),
            ("/tmp/blorp", "/tmp/blorp"),
            ("", "."),
            ("a//b/./c/", "a/b/c"),
            ("../../x", "../../x"),
            ("a/../..", ".."),
            ("/../x", "/x"),
            ("/", "/"),
            ("./", "."),
        ];
        for (input, want) in cases {
            assert_eq!(clean_path(input), want, "{input:?}");
        }
    }
}
