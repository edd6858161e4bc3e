//! The tokens of images, audio, video and documents: [`MediaTokens`], by each provider's
//! documented rule where there is one, and a documented default otherwise.

use crate::message::{ContentBlock, MediaRef};

/// Which provider's rule counts an image.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ImageRule {
    /// OpenAI's tiles; `low_detail` for `detail: "low"` (85 tokens).
    OpenAi {
        /// The request's `detail` is `"low"`.
        low_detail: bool,
    },
    /// Anthropic's width × height / 750.
    Anthropic,
    /// The larger of OpenAI's (high detail) and Anthropic's (the default).
    #[default]
    Largest,
}

/// How many tokens media blocks take in a prompt, by each provider's documented rule where there is one, and a documented default otherwise:
///
/// - **Images, OpenAI** (GPT-4o, GPT-4.1, o-series; "Calculating costs" in OpenAI's vision
///   guide): `detail: "low"` costs 85 tokens; `"high"` (and `"auto"`, taken as high) scales the
///   image to fit in 2048 × 2048, then down so that its shortest side is at most 768 px, and
///   costs 85 + 170 per 512 px tile.
/// - **Images, Anthropic** ("Vision" guide): an image whose long edge is over 1568 px is scaled
///   down to it, and costs width × height / 750 tokens, at most about 1,600.
/// - **Image dimensions**: `width`/`height` of the [`MediaRef`] when set; else read from the
///   header of inline base64 data (`data_base64` or a `data:` URL) of a PNG, GIF, JPEG or WebP
///   image, decoding only the first bytes (no image crate); else
///   [`unknown_image`](MediaTokens::unknown_image) (default 2048 × 2048: a photo or screenshot,
///   which the providers scale down to their maximum).
/// - **Audio**: [`audio_per_second`](MediaTokens::audio_per_second) (default 32, Gemini's
///   documented rate; OpenAI's audio models count fewer) times the duration: `duration_ms`, else
///   the size at 16 kB per second (128 kbit/s), else
///   [`unknown_seconds`](MediaTokens::unknown_seconds) (default 30).
/// - **Video**: [`video_per_second`](MediaTokens::video_per_second) (default 263, Gemini's
///   rate) times the duration, found as for audio.
/// - **Documents**: [`per_page`](MediaTokens::per_page) (default 1,500, the low end of
///   Anthropic's documented 1,500–3,000 per PDF page; Gemini counts 258) times the pages:
///   `pages` when listed, else one per 100 kB, else one; or the extracted `text`'s tokens when
///   that is more.
///
/// The default image rule, [`ImageRule::Largest`], takes the larger of OpenAI's (high detail)
/// and Anthropic's: a budget must hold the image whichever provider it goes to.
///
/// ```
/// use agentstate::context::{ImageRule, MediaTokens};
///
/// let openai = MediaTokens { image: ImageRule::OpenAi { low_detail: false }, ..MediaTokens::default() };
/// assert_eq!(openai.image(1024, 1024), 765); // 768 × 768: 4 tiles
/// assert_eq!(openai.image(2048, 4096), 1105); // 768 × 1536: 6 tiles
/// let low = MediaTokens { image: ImageRule::OpenAi { low_detail: true }, ..MediaTokens::default() };
/// assert_eq!(low.image(4000, 3000), 85);
/// let anthropic = MediaTokens { image: ImageRule::Anthropic, ..MediaTokens::default() };
/// assert_eq!(anthropic.image(1000, 1000), 1334);
/// assert_eq!(MediaTokens::default().image(1024, 1024), 1399); // the larger: Anthropic's
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MediaTokens {
    /// The image rule (default [`ImageRule::Largest`]).
    pub image: ImageRule,
    /// The dimensions assumed for an image whose size cannot be known (default 2048 × 2048).
    pub unknown_image: (u32, u32),
    /// Tokens per second of audio (default 32).
    pub audio_per_second: u32,
    /// Tokens per second of video (default 263).
    pub video_per_second: u32,
    /// The duration assumed for audio or video of unknown duration and size (default 30).
    pub unknown_seconds: u32,
    /// Tokens per document page (default 1,500).
    pub per_page: u32,
}

impl Default for MediaTokens {
    fn default() -> Self {
        MediaTokens {
            image: ImageRule::Largest,
            unknown_image: (2048, 2048),
            audio_per_second: 32,
            video_per_second: 263,
            unknown_seconds: 30,
            per_page: 1_500,
        }
    }
}

impl MediaTokens {
    /// The tokens of a `width` × `height` image under [`image`](MediaTokens::image).
    pub fn image(&self, width: u32, height: u32) -> u32 {
        match self.image {
            ImageRule::OpenAi { low_detail } => openai(width, height, low_detail),
            ImageRule::Anthropic => anthropic(width, height),
            ImageRule::Largest => openai(width, height, false).max(anthropic(width, height)),
        }
    }

    /// The tokens of a media block (image, audio, video, document) besides its text; 0 for any
    /// other block. `text_tokens` is the extracted text's count of a document block, if any.
    ///
    /// ```
    /// use agentstate::context::MediaTokens;
    /// use agentstate::message::{AudioBlock, ContentBlock, MediaRef};
    ///
    /// let mut clip = MediaRef::url("https://example.com/note.mp3");
    /// clip.duration_ms = Some(4_000);
    /// let audio = ContentBlock::Audio(AudioBlock::new(clip));
    /// assert_eq!(MediaTokens::default().block(&audio, 0), 4 * 32);
    /// assert_eq!(MediaTokens::default().block(&ContentBlock::text("hi"), 0), 0);
    /// ```
    pub fn block(&self, block: &ContentBlock, text_tokens: u32) -> u32 {
        match block {
            ContentBlock::Image(image) => {
                let (w, h) = image_size(&image.media).unwrap_or(self.unknown_image);
                self.image(w, h)
            }
            ContentBlock::Audio(audio) => self.timed(&audio.media, self.audio_per_second),
            ContentBlock::Video(video) => self.timed(&video.media, self.video_per_second),
            ContentBlock::Document(document) => {
                let pages = match &document.pages {
                    Some(pages) if !pages.is_empty() => pages.len() as u64,
                    _ => size_of(&document.media).map_or(1, |b| b.div_ceil(100_000).max(1)),
                };
                let pages = (pages * u64::from(self.per_page)).min(u64::from(u32::MAX)) as u32;
                pages.max(text_tokens)
            }
            _ => 0,
        }
    }

    fn timed(&self, media: &MediaRef, per_second: u32) -> u32 {
        let seconds = match (media.duration_ms, size_of(media)) {
            (Some(ms), _) if ms > 0 => (ms as u64).div_ceil(1000),
            (_, Some(bytes)) => bytes.div_ceil(16_000).max(1),
            _ => u64::from(self.unknown_seconds),
        };
        (seconds * u64::from(per_second)).min(u64::from(u32::MAX)) as u32
    }
}

/// OpenAI's tile rule.
fn openai(width: u32, height: u32, low_detail: bool) -> u32 {
    if low_detail {
        return 85;
    }
    let (mut w, mut h) = (f64::from(width.max(1)), f64::from(height.max(1)));
    let fit = (2048.0 / w.max(h)).min(1.0);
    (w, h) = (w * fit, h * fit);
    let short = (768.0 / w.min(h)).min(1.0);
    (w, h) = ((w * short).round(), (h * short).round());
    let tiles = (w / 512.0).ceil() * (h / 512.0).ceil();
    85 + 170 * tiles as u32
}

/// Anthropic's area rule.
fn anthropic(width: u32, height: u32) -> u32 {
    let (mut w, mut h) = (f64::from(width.max(1)), f64::from(height.max(1)));
    let fit = (1568.0 / w.max(h)).min(1.0);
    (w, h) = ((w * fit).round(), (h * fit).round());
    ((w * h / 750.0).ceil() as u32).min(1_600)
}

/// The size in bytes of media: `size_bytes`, else that of its inline base64 data.
fn size_of(media: &MediaRef) -> Option<u64> {
    if let Some(bytes) = media.size_bytes.filter(|&b| b > 0) {
        return Some(bytes as u64);
    }
    inline_base64(media).map(|data| data.len() as u64 / 4 * 3)
}

/// The base64 payload of inline media: `data_base64`, or a `data:...;base64,` URL's.
fn inline_base64(media: &MediaRef) -> Option<&str> {
    if let Some(data) = media.data_base64.as_deref() {
        return Some(data);
    }
    let url = media.url.as_deref()?.strip_prefix("data:")?;
    let (head, data) = url.split_once(',')?;
    head.ends_with(";base64").then_some(data)
}

/// An image's width and height: the [`MediaRef`]'s fields, else read from the header of its
/// inline base64 data (PNG, GIF, JPEG, WebP).
///
/// ```
/// use agentstate::context::image_size;
/// use agentstate::message::MediaRef;
///
/// // A 1 × 1 PNG.
/// let png = MediaRef::data(
///     "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
///     "image/png",
/// );
/// assert_eq!(image_size(&png), Some((1, 1)));
/// let mut sized = MediaRef::url("https://example.com/a.jpg");
/// assert_eq!(image_size(&sized), None);
/// (sized.width, sized.height) = (Some(640), Some(480));
/// assert_eq!(image_size(&sized), Some((640, 480)));
/// ```
pub fn image_size(media: &MediaRef) -> Option<(u32, u32)> {
    if let (Some(w), Some(h)) = (media.width, media.height) {
        if w > 0 && h > 0 {
            return Some((
                w.min(i64::from(u32::MAX)) as u32,
                h.min(i64::from(u32::MAX)) as u32,
            ));
        }
    }
    let data = inline_base64(media)?;
    // A header is in the first bytes, but a JPEG's frame header may follow metadata: decode
    // the first 64 kB at most.
    let bytes = decode_prefix(data, 64 * 1024);
    header_size(&bytes)
}

/// The dimensions in an image file's header.
fn header_size(b: &[u8]) -> Option<(u32, u32)> {
    let be16 = |i: usize| Some(u32::from(u16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?])));
    let le16 = |i: usize| Some(u32::from(u16::from_le_bytes([*b.get(i)?, *b.get(i + 1)?])));
    let be32 = |i: usize| Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?));
    let le24 = |i: usize| {
        let s = b.get(i..i + 3)?;
        Some(u32::from(s[0]) | u32::from(s[1]) << 8 | u32::from(s[2]) << 16)
    };
    if b.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Some((be32(16)?, be32(20)?));
    }
    if b.starts_with(b"GIF8") {
        return Some((le16(6)?, le16(8)?));
    }
    if b.starts_with(b"RIFF") && b.get(8..12) == Some(b"WEBP") {
        return match b.get(12..16)? {
            b"VP8 " => Some((le16(26)? & 0x3fff, le16(28)? & 0x3fff)),
            b"VP8L" => {
                let bits = u32::from_le_bytes(b.get(21..25)?.try_into().ok()?);
                Some(((bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1))
            }
            b"VP8X" => Some((le24(24)? + 1, le24(27)? + 1)),
            _ => None,
        };
    }
    if b.starts_with(&[0xff, 0xd8]) {
        // JPEG: walk the segments to a start-of-frame marker.
        let mut i = 2;
        while i + 9 < b.len() {
            if b[i] != 0xff {
                return None;
            }
            let marker = b[i + 1];
            if marker == 0xff {
                i += 1;
                continue;
            }
            let sof = (0xc0..=0xcf).contains(&marker) && ![0xc4, 0xc8, 0xcc].contains(&marker);
            if sof {
                return Some((be16(i + 7)?, be16(i + 5)?));
            }
            i += 2 + be16(i + 2)? as usize;
        }
    }
    None
}

/// The first `max` bytes (about) that the base64 text `data` encodes; stops at the first
/// character outside the alphabet (padding included).
fn decode_prefix(data: &str, max: usize) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(max.min(data.len() / 4 * 3));
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in data.bytes().filter(|c| !c.is_ascii_whitespace()) {
        let Some(v) = value(c) else { break };
        acc = acc << 6 | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
            if out.len() >= max {
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Base64 of bytes (the test's own encoder, to build headers).
    fn encode(bytes: &[u8]) -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk.len();
            let mut b = [0u8; 3];
            b[..n].copy_from_slice(chunk);
            let v = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
            for k in 0..4 {
                if k <= n {
                    out.push(A[(v >> (18 - 6 * k) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    fn size(bytes: &[u8]) -> Option<(u32, u32)> {
        image_size(&MediaRef::data(encode(bytes), "image/x"))
    }

    #[test]
    fn headers_give_dimensions() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        png.extend(1920u32.to_be_bytes());
        png.extend(1080u32.to_be_bytes());
        png.extend([8, 6, 0, 0, 0]);
        assert_eq!(size(&png), Some((1920, 1080)));
        let gif = [
            b"GIF89a".as_slice(),
            &640u16.to_le_bytes(),
            &480u16.to_le_bytes(),
        ]
        .concat();
        assert_eq!(size(&gif), Some((640, 480)));
        // JPEG: SOI, an APP0 segment of 16 bytes, then SOF0 (height 600, width 800).
        let mut jpeg = vec![0xff, 0xd8, 0xff, 0xe0, 0, 16];
        jpeg.extend([0u8; 14]);
        jpeg.extend([0xff, 0xc0, 0, 17, 8, 0x02, 0x58, 0x03, 0x20, 3]);
        jpeg.extend([0u8; 12]);
        assert_eq!(size(&jpeg), Some((800, 600)));
        // WebP, extended: 24-bit width and height minus one.
        let mut webp = b"RIFF\0\0\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0".to_vec();
        webp.extend([0xff, 0x03, 0x00, 0x57, 0x02, 0x00]); // 1024 × 600
        assert_eq!(size(&webp), Some((1024, 600)));
        // Lossless: 14 bits each.
        let bits: u32 = (300 - 1) | (200 - 1) << 14;
        let mut lossless = b"RIFF\0\0\0\0WEBPVP8L\0\0\0\0\x2f".to_vec();
        lossless.extend(bits.to_le_bytes());
        assert_eq!(size(&lossless), Some((300, 200)));
        // In a data: URL too; nothing for other bytes.
        let url = MediaRef::url(format!("data:image/gif;base64,{}", encode(&gif)));
        assert_eq!(image_size(&url), Some((640, 480)));
        assert_eq!(size(b"not an image at all"), None);
    }

    #[test]
    fn audio_video_and_documents() {
        use crate::message::{AudioBlock, DocumentBlock, VideoBlock};
        let m = MediaTokens::default();
        let mut clip = MediaRef::url("https://x/a.mp3");
        assert_eq!(
            m.block(&ContentBlock::Audio(AudioBlock::new(clip.clone())), 0),
            960
        );
        clip.duration_ms = Some(10_500);
        assert_eq!(
            m.block(&ContentBlock::Audio(AudioBlock::new(clip.clone())), 0),
            11 * 32
        );
        assert_eq!(
            m.block(&ContentBlock::Video(VideoBlock::new(clip)), 0),
            11 * 263
        );
        let sized = MediaRef {
            size_bytes: Some(160_000),
            ..MediaRef::default()
        };
        assert_eq!(
            m.block(&ContentBlock::Audio(AudioBlock::new(sized)), 0),
            320
        );
        let mut doc = DocumentBlock::new(MediaRef::file_id("f"));
        assert_eq!(m.block(&ContentBlock::Document(doc.clone()), 0), 1_500);
        doc.pages = Some(vec![1, 2, 3]);
        assert_eq!(m.block(&ContentBlock::Document(doc.clone()), 0), 4_500);
        assert_eq!(m.block(&ContentBlock::Document(doc), 9_000), 9_000);
    }
}
