//! `--result-markers`: the JSON result on stdout between two marker lines, so that it travels in
//! a pod's log (`kubectl logs`) to `loadgen merge`, which finds it there ([`extract`]).

/// The line before the JSON result.
pub const BEGIN: &str = "-----BEGIN LOADGEN RESULT-----";
/// The line after it.
pub const END: &str = "-----END LOADGEN RESULT-----";

/// `json` between the markers, each on a line of its own.
pub fn wrap(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + BEGIN.len() + END.len() + 3);
    out.push_str(BEGIN);
    out.push('\n');
    out.push_str(json);
    if !json.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(END);
    out.push('\n');
    out
}

/// The results between markers in a log, in the order their blocks end. A line's text before
/// its marker is its prefix (`kubectl logs --prefix` writes `[pod/NAME/CONTAINER] `, a timestamp
/// may stand there too): the lines of one block are those with the same prefix, with the prefix
/// taken off, so that the logs of several pods may even be interleaved. `Ok(None)` when the text
/// has no marker at all; an error for a block begun and not ended, or ended and not begun.
pub fn extract(text: &str) -> Result<Option<Vec<String>>, String> {
    // Open blocks by prefix; few at once (one per pod).
    let mut open: Vec<(String, String)> = Vec::new();
    let mut done = Vec::new();
    let mut any = false;
    for (n, line) in text.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(at) = line.find(BEGIN) {
            any = true;
            let prefix = &line[..at];
            if open.iter().any(|(p, _)| p == prefix) {
                return Err(format!(
                    "line {}: a second {BEGIN} before the {END} of the first",
                    n + 1
                ));
            }
            open.push((prefix.to_string(), String::new()));
        } else if let Some(at) = line.find(END) {
            any = true;
            let prefix = &line[..at];
            let i = open
                .iter()
                .position(|(p, _)| p == prefix)
                .ok_or_else(|| format!("line {}: {END} without a {BEGIN}", n + 1))?;
            done.push(open.swap_remove(i).1);
        } else if let Some((prefix, body)) = open
            .iter_mut()
            .filter(|(p, _)| line.starts_with(p.as_str()))
            // The longest prefix that fits: "" fits every line.
            .max_by_key(|(p, _)| p.len())
        {
            body.push_str(&line[prefix.len()..]);
            body.push('\n');
        }
    }
    if let Some((prefix, _)) = open.first() {
        return Err(format!("{BEGIN} of '{prefix}' without an {END}"));
    }
    Ok(any.then_some(done))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrapped_result_comes_back_as_it_was() {
        let json = "{\n  \"a\": 1\n}\n";
        let log = format!("report text\n{}more text\n", wrap(json));
        assert_eq!(extract(&log), Ok(Some(vec![json.to_string()])));
        assert_eq!(extract("{}"), Ok(None), "plain JSON has no markers");
    }

    #[test]
    fn prefixed_and_interleaved_logs_of_several_pods_are_told_apart() {
        let a = "{\"pod\": \"a\",\n \"n\": 1}\n";
        let b = "{\"pod\": \"b\",\n \"n\": 2}\n";
        let pa = "[pod/run-0-x/loadgen] ";
        let pb = "[pod/run-1-y/loadgen] ";
        let mut log = format!("{pa}progress\n{pb}progress\nunprefixed noise\n");
        let (wa, wb) = (wrap(a), wrap(b));
        let (la, lb): (Vec<&str>, Vec<&str>) = (wa.lines().collect(), wb.lines().collect());
        // Line by line, alternating pods (b with CRLF line ends).
        for i in 0..la.len().max(lb.len()) {
            if let Some(l) = la.get(i) {
                log.push_str(&format!("{pa}{l}\n"));
            }
            if let Some(l) = lb.get(i) {
                log.push_str(&format!("{pb}{l}\r\n"));
            }
        }
        log.push_str(&format!("{pb}done\n"));
        assert_eq!(extract(&log), Ok(Some(vec![a.to_string(), b.to_string()])));
    }

    #[test]
    fn unbalanced_markers_are_errors_not_results() {
        assert!(extract(&format!("{BEGIN}\n{{}}\n")).is_err());
        assert!(extract(&format!("{{}}\n{END}\n")).is_err());
        assert!(extract(&format!("{BEGIN}\n{BEGIN}\n{END}\n")).is_err());
    }
}
