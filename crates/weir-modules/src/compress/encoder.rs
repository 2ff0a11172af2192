//! Streaming encoders: bytes in chunk by chunk, compressed bytes out as the codec
//! produces them, the end of the stream at the last chunk.

use std::io::Write;

use super::negotiate::Encoding;

/// The compression level of each encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Levels {
    /// gzip: 1 (fastest) to 9 (smallest).
    pub gzip: u32,
    /// Brotli: 0 to 11.
    pub brotli: u32,
    /// Zstandard: 1 to 22.
    pub zstd: i32,
}

impl Default for Levels {
    /// Levels a proxy can afford on every miss; see docs/benchmarks.md.
    fn default() -> Levels {
        Levels {
            gzip: 6,
            brotli: 2,
            zstd: 3,
        }
    }
}

/// One body being compressed.
pub enum Encoder {
    /// gzip, by zlib-rs.
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    /// Brotli (boxed: its state is large).
    Brotli(Box<brotli::CompressorWriter<Vec<u8>>>),
    /// Zstandard.
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
}

/// The smallest window (log2 of bytes) that holds a body of `len` bytes, within
/// `[min, max]`: a small body then costs a small window's memory and set-up.
fn window_bits(len: Option<u64>, min: u32, max: u32) -> u32 {
    match len {
        Some(n) => (64 - n.max(1).leading_zeros()).clamp(min, max),
        None => max,
    }
}

impl Encoder {
    /// An encoder for `encoding` at its level in `levels`; `length` is the body's
    /// length if known (a hint that sizes the window, never trusted for output).
    pub fn new(encoding: Encoding, levels: &Levels, length: Option<u64>) -> Encoder {
        match encoding {
            Encoding::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::new(levels.gzip),
            )),
            Encoding::Brotli => {
                // Brotli's window is 2^lgwin - 16 bytes, 10 to 24 bits; 22 is its
                // default for bodies of unknown length.
                let lgwin = window_bits(length.map(|n| n + 16), 16, 22);
                Encoder::Brotli(Box::new(brotli::CompressorWriter::new(
                    Vec::new(),
                    4096,
                    levels.brotli,
                    lgwin,
                )))
            }
            Encoding::Zstd => {
                let mut e = zstd::stream::write::Encoder::new(Vec::new(), levels.zstd)
                    .expect("a zstd context");
                if length.is_some() {
                    // Smaller windows for small bodies; below zstd's default only.
                    let _ = e.window_log(window_bits(length, 10, 23));
                }
                Encoder::Zstd(e)
            }
        }
    }

    /// Compresses `data`; returns what the codec has produced so far (maybe nothing:
    /// codecs buffer).
    pub fn write(&mut self, data: &[u8]) -> Vec<u8> {
        // Writing into a Vec cannot fail; an error here is a codec bug.
        let out = match self {
            Encoder::Gzip(e) => {
                e.write_all(data).expect("gzip");
                e.get_mut()
            }
            Encoder::Brotli(e) => {
                e.write_all(data).expect("brotli");
                e.get_mut()
            }
            Encoder::Zstd(e) => {
                e.write_all(data).expect("zstd");
                e.get_mut()
            }
        };
        std::mem::take(out)
    }

    /// Ends the stream: the last compressed bytes.
    pub fn finish(self) -> Vec<u8> {
        match self {
            Encoder::Gzip(e) => e.finish().expect("gzip"),
            // Ending the stream is what `into_inner` does.
            Encoder::Brotli(e) => e.into_inner(),
            Encoder::Zstd(e) => e.finish().expect("zstd"),
        }
    }

    /// Compresses a whole body at once.
    pub fn compress(encoding: Encoding, levels: &Levels, body: &[u8]) -> Vec<u8> {
        let mut e = Encoder::new(encoding, levels, Some(body.len() as u64));
        let mut out = e.write(body);
        out.extend(e.finish());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    pub fn decode(encoding: Encoding, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        match encoding {
            Encoding::Gzip => {
                flate2::read::GzDecoder::new(data)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Encoding::Brotli => {
                brotli::Decompressor::new(data, 4096)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Encoding::Zstd => out = zstd::stream::decode_all(data).unwrap(),
        }
        out
    }

    fn text(n: usize) -> Vec<u8> {
        let line = b"static int add(int a, int b) { return a + b; } /* sum */\n";
        line.iter().cycle().take(n).copied().collect()
    }

    #[test]
    fn round_trips_in_chunks_of_any_size() {
        for encoding in [Encoding::Gzip, Encoding::Brotli, Encoding::Zstd] {
            for (len, hint) in [(0, Some(0)), (10, None), (100_000, Some(100_000))] {
                let body = text(len);
                let mut e = Encoder::new(encoding, &Levels::default(), hint);
                let mut out = Vec::new();
                for chunk in body.chunks(777) {
                    out.extend(e.write(chunk));
                }
                out.extend(e.finish());
                assert_eq!(decode(encoding, &out), body, "{encoding:?} {len}");
                if len == 100_000 {
                    assert!(out.len() < len / 10, "{encoding:?}: {}", out.len());
                }
            }
        }
    }

    #[test]
    fn windows_fit_the_body() {
        assert_eq!(window_bits(Some(8000), 10, 23), 13);
        assert_eq!(window_bits(Some(8192), 10, 23), 14);
        assert_eq!(window_bits(Some(1), 10, 23), 10);
        assert_eq!(window_bits(Some(1 << 40), 10, 23), 23);
        assert_eq!(window_bits(None, 16, 22), 22);
    }
}
