//! A transcoding job as it travels to a helper process and back: the parameters and
//! the image in, the outcome out. [`handle`] is what the helper runs.

use super::codec::{transcode, Format, Outcome, Params};

/// Bumped when the layout changes: a helper answers a job of another version as
/// failed (only possible while the binary is replaced under a running proxy).
const VERSION: u8 = 1;
/// version, quality, webp, max width, max height, max pixels.
const HEADER: usize = 1 + 1 + 1 + 4 + 4 + 8;

/// The job's bytes: the parameters, then the image.
pub fn encode(params: &Params, image: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + image.len());
    out.push(VERSION);
    out.push(params.quality);
    out.push(params.webp as u8);
    out.extend_from_slice(&params.max_width.to_be_bytes());
    out.extend_from_slice(&params.max_height.to_be_bytes());
    out.extend_from_slice(&params.max_pixels.to_be_bytes());
    out.extend_from_slice(image);
    out
}

/// The parameters and the image of a job.
fn decode(job: &[u8]) -> Result<(Params, &[u8]), String> {
    if job.len() < HEADER || job[0] != VERSION {
        return Err("not a transcoding job of this version".into());
    }
    let u32_at = |i: usize| u32::from_be_bytes(job[i..i + 4].try_into().expect("4 bytes"));
    let params = Params {
        quality: job[1],
        webp: job[2] != 0,
        max_width: u32_at(3),
        max_height: u32_at(7),
        max_pixels: u64::from_be_bytes(job[11..19].try_into().expect("8 bytes")),
    };
    Ok((params, &job[HEADER..]))
}

/// Runs one job (in a helper process): the encoded outcome, or why the job itself is
/// malformed.
pub fn handle(job: &[u8]) -> Result<Vec<u8>, String> {
    let (params, image) = decode(job)?;
    Ok(encode_outcome(&transcode(image, &params)))
}

const TRANSCODED_JPEG: u8 = 0;
const TRANSCODED_WEBP: u8 = 1;
const NOT_SMALLER: u8 = 2;
const TOO_MANY_PIXELS: u8 = 3;
const UNSUITABLE: u8 = 4;
const BAD_IMAGE: u8 = 5;

/// An outcome's bytes: a code, then the image or the message.
pub fn encode_outcome(outcome: &Outcome) -> Vec<u8> {
    let (code, rest): (u8, &[u8]) = match outcome {
        Outcome::Transcoded {
            format: Format::Jpeg,
            data,
        } => (TRANSCODED_JPEG, data),
        Outcome::Transcoded {
            format: Format::Webp,
            data,
        } => (TRANSCODED_WEBP, data),
        Outcome::NotSmaller => (NOT_SMALLER, &[]),
        Outcome::TooManyPixels => (TOO_MANY_PIXELS, &[]),
        Outcome::Unsuitable => (UNSUITABLE, &[]),
        Outcome::BadImage(m) => (BAD_IMAGE, m.as_bytes()),
    };
    let mut out = Vec::with_capacity(1 + rest.len());
    out.push(code);
    out.extend_from_slice(rest);
    out
}

/// The outcome a helper answered.
pub fn decode_outcome(mut answer: Vec<u8>) -> Result<Outcome, String> {
    if answer.is_empty() {
        return Err("empty answer".into());
    }
    let rest = answer.split_off(1);
    Ok(match answer[0] {
        TRANSCODED_JPEG => Outcome::Transcoded {
            format: Format::Jpeg,
            data: rest,
        },
        TRANSCODED_WEBP => Outcome::Transcoded {
            format: Format::Webp,
            data: rest,
        },
        NOT_SMALLER => Outcome::NotSmaller,
        TOO_MANY_PIXELS => Outcome::TooManyPixels,
        UNSUITABLE => Outcome::Unsuitable,
        BAD_IMAGE => Outcome::BadImage(String::from_utf8_lossy(&rest).into_owned()),
        other => return Err(format!("unknown outcome code {other}")),
    })
}
