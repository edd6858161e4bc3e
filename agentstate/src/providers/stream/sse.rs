//! A server-sent events decoder: bytes in, split anywhere, events out, as the WHATWG HTML
//! standard's "event stream interpretation" reads them.

use std::borrow::Cow;

/// A push decoder of server-sent events.
///
/// A server-sent events decoder: bytes in, split anywhere, events out, as the WHATWG HTML
/// standard's "event stream interpretation" reads them.
///
/// Lines end with CRLF, LF or CR (a CRLF split between two chunks is one line end); a line
/// starting with `:` is a comment; `event:` sets the event's type, `data:` lines are joined
/// with newlines, `id:` and `retry:` are read and otherwise ignored, one space after the colon
/// is dropped, a leading byte order mark is skipped, and an empty line dispatches the event
/// (none when it has no `data`). An event left unfinished when the stream ends is discarded,
/// as the standard says. Invalid UTF-8 is decoded with replacement characters.
///
/// The crates made for this (`eventsource-stream`, `sse-stream`) read an async `Stream` of
/// bytes; the accumulators are synchronous and take bytes as the caller gets them, so this
/// small push decoder stands in.
///
/// ```
/// use agentstate::providers::stream::SseDecoder;
///
/// let mut decoder = SseDecoder::new();
/// let mut events = Vec::new();
/// for chunk in ["event: ping\r", "\ndata: {\"a\"", ":1}\r\n\r\n: comment\n", "data: x\ndata: y\n\n"] {
///     decoder.push(chunk.as_bytes(), &mut |event: &str, data: &str| {
///         events.push((event.to_owned(), data.to_owned()));
///         Ok::<(), ()>(())
///     }).unwrap();
/// }
/// assert_eq!(events, [("ping".to_owned(), "{\"a\":1}".to_owned()),
///                     ("message".to_owned(), "x\ny".to_owned())]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct SseDecoder {
    /// The start of a line whose end has not arrived yet.
    line: Vec<u8>,
    /// The event type of the event being read (empty: `message`).
    event: Vec<u8>,
    /// The data of the event being read, each line followed by `\n`.
    data: Vec<u8>,
    /// Whether the last chunk ended with a CR, so that a LF starting the next one ends no line.
    skip_lf: bool,
    /// Whether a line was read (a byte order mark is skipped before the first one only).
    started: bool,
    /// The last event id seen.
    last_id: Option<String>,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        SseDecoder::default()
    }

    /// The last `id:` field seen, as a client would send it in `Last-Event-ID`.
    ///
    /// ```
    /// use agentstate::providers::stream::SseDecoder;
    ///
    /// let mut decoder = SseDecoder::new();
    /// decoder.push(b"id: 7\ndata: x\n\n", &mut |_: &str, _: &str| Ok::<(), ()>(())).unwrap();
    /// assert_eq!(decoder.last_event_id(), Some("7"));
    /// ```
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// Reads a chunk of bytes, calling `on_event(type, data)` for each event it completes
    /// (`type` is `message` when the event has no `event:` field). The first error of
    /// `on_event` stops the reading and is returned; the rest of the chunk is not read.
    pub fn push<E>(
        &mut self,
        mut bytes: &[u8],
        on_event: &mut impl FnMut(&str, &str) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.skip_lf && !bytes.is_empty() {
            self.skip_lf = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
        }
        while let Some(end) = line_end(bytes) {
            let cr = bytes[end] == b'\r';
            if self.line.is_empty() {
                // The common event, one `data:` line and the empty line after it, both in
                // this chunk: dispatched from the chunk, without copying.
                if let Some((value, next, skip_lf)) = self.lone_data_line(bytes, end, cr) {
                    let data = match std::str::from_utf8(value) {
                        Ok(data) => Cow::Borrowed(data),
                        Err(_) => String::from_utf8_lossy(value),
                    };
                    let result = {
                        let event: Cow<'_, str> = if self.event.is_empty() {
                            Cow::Borrowed("message")
                        } else {
                            String::from_utf8_lossy(&self.event)
                        };
                        on_event(&event, &data)
                    };
                    self.event.clear();
                    result?;
                    bytes = &bytes[next..];
                    self.skip_lf = skip_lf;
                    continue;
                }
                self.line_done(&bytes[..end], on_event)?;
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(&bytes[..end]);
                let done = self.line_done(&line, on_event);
                line.clear();
                self.line = line;
                done?;
            }
            bytes = &bytes[end + 1..];
            if cr {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    /// When the line ending at `end` is a `data` line that is the event's only one and an
    /// empty line follows it in `bytes`: its value, where the bytes after the empty line start,
    /// and whether a LF starting the next chunk is to be skipped.
    fn lone_data_line<'b>(
        &self,
        bytes: &'b [u8],
        end: usize,
        cr: bool,
    ) -> Option<(&'b [u8], usize, bool)> {
        if !self.started || !self.data.is_empty() {
            return None;
        }
        let value = match bytes[..end].strip_prefix(b"data")? {
            [] => &[][..],
            [b':', value @ ..] => value.strip_prefix(b" ").unwrap_or(value),
            _ => return None,
        };
        let mut at = end + 1;
        if cr {
            match bytes.get(at) {
                Some(b'\n') => at += 1,
                Some(_) => {}
                None => return None, // a LF may start the next chunk
            }
        }
        match bytes.get(at) {
            Some(b'\n') => Some((value, at + 1, false)),
            Some(b'\r') => match bytes.get(at + 1) {
                Some(b'\n') => Some((value, at + 2, false)),
                Some(_) => Some((value, at + 1, false)),
                None => Some((value, at + 1, true)),
            },
            _ => None,
        }
    }

    fn line_done<E>(
        &mut self,
        mut line: &[u8],
        on_event: &mut impl FnMut(&str, &str) -> Result<(), E>,
    ) -> Result<(), E> {
        if !self.started {
            self.started = true;
            line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
        }
        if line.is_empty() {
            return self.dispatch(on_event);
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                self.data.extend_from_slice(value);
                self.data.push(b'\n');
            }
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            b"id" if !value.contains(&0) => {
                self.last_id = Some(String::from_utf8_lossy(value).into_owned());
            }
            _ => {} // `retry` and unknown fields
        }
        Ok(())
    }

    fn dispatch<E>(
        &mut self,
        on_event: &mut impl FnMut(&str, &str) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.data.is_empty() {
            self.event.clear();
            return Ok(());
        }
        self.data.pop(); // the last line's `\n`
        let result = {
            let data = String::from_utf8_lossy(&self.data);
            let event: Cow<'_, str> = if self.event.is_empty() {
                Cow::Borrowed("message")
            } else {
                String::from_utf8_lossy(&self.event)
            };
            on_event(&event, &data)
        };
        self.data.clear();
        self.event.clear();
        result
    }
}

/// The position of the first CR or LF, eight bytes at a time (a line of JSON is long).
fn line_end(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Whether a word has a zero byte (exact: no false positives).
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH != 0;
    let mut start = 0;
    for word in bytes.chunks_exact(8) {
        let mut array = [0u8; 8];
        array.copy_from_slice(word);
        let word = u64::from_le_bytes(array);
        if zero(word ^ (ONES * u64::from(b'\n'))) || zero(word ^ (ONES * u64::from(b'\r'))) {
            break;
        }
        start += 8;
    }
    bytes[start..]
        .iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .map(|at| at + start)
}
