//! Decoding, resizing and encoding one image: what a helper process does for a job.

use std::io::Cursor;

use image::codecs::gif::GifDecoder;
use image::codecs::png::PngDecoder;
use image::codecs::webp::WebPDecoder;
use image::imageops::FilterType;
use image::{AnimationDecoder, DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};

/// What to make of an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Encoder quality, 1 to 100.
    pub quality: u8,
    /// Largest width kept (0: any); a wider image is scaled down, aspect kept.
    pub max_width: u32,
    /// Largest height kept (0: any).
    pub max_height: u32,
    /// Produce WebP (the client accepts it) rather than JPEG.
    pub webp: bool,
    /// Images with more pixels than this are not decoded at all.
    pub max_pixels: u64,
}

/// An encoded result's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `image/jpeg`
    Jpeg,
    /// `image/webp`
    Webp,
}

impl Format {
    /// Its media type.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Jpeg => "image/jpeg",
            Format::Webp => "image/webp",
        }
    }
}

/// What became of an image. Every outcome but `Transcoded` keeps the original.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A smaller image in `format`.
    Transcoded {
        /// The new image's format.
        format: Format,
        /// Its bytes.
        data: Vec<u8>,
    },
    /// The result was not smaller than the original.
    NotSmaller,
    /// Width times height is over the limit: never decoded (a decompression bomb).
    TooManyPixels,
    /// Animated, or transparent with only JPEG to offer: re-encoding would lose
    /// frames or transparency.
    Unsuitable,
    /// Not an image this transcoder decodes, or a broken one.
    BadImage(String),
}

/// Transcodes `input` as `params` say.
pub fn transcode(input: &[u8], params: &Params) -> Outcome {
    match try_transcode(input, params) {
        Ok(outcome) => outcome,
        Err(e) => Outcome::BadImage(e.to_string()),
    }
}

fn try_transcode(input: &[u8], params: &Params) -> image::ImageResult<Outcome> {
    let reader = ImageReader::new(Cursor::new(input)).with_guessed_format()?;
    let Some(format) = reader.format() else {
        return Ok(Outcome::BadImage("not a known image format".into()));
    };
    if !matches!(
        format,
        ImageFormat::Jpeg | ImageFormat::Png | ImageFormat::Gif | ImageFormat::WebP
    ) {
        return Ok(Outcome::BadImage(format!("{format:?} is not transcoded")));
    }
    let mut decoder = reader.into_decoder()?;
    let (width, height) = decoder.dimensions();
    if u64::from(width) * u64::from(height) > params.max_pixels {
        return Ok(Outcome::TooManyPixels);
    }
    // Belt and braces: the decoder itself may allocate no more than the pixels need.
    let mut limits = Limits::default();
    limits.max_alloc = Some(params.max_pixels.saturating_mul(16).max(1 << 20));
    decoder.set_limits(limits)?;
    if is_animated(format, input)? {
        return Ok(Outcome::Unsuitable);
    }
    let orientation = decoder.orientation()?;
    let mut image = DynamicImage::from_decoder(decoder)?;
    image.apply_orientation(orientation);
    let image = fit(image, params.max_width, params.max_height);
    let opaque = !image.color().has_alpha() || image.to_rgba8().pixels().all(|p| p[3] == u8::MAX);
    let (format, data) = if params.webp {
        match encode_webp(&image, opaque, params.quality) {
            Ok(data) => (Format::Webp, data),
            Err(e) => return Ok(Outcome::BadImage(e)),
        }
    } else if opaque {
        match encode_jpeg(&image, params.quality) {
            Ok(data) => (Format::Jpeg, data),
            Err(e) => return Ok(Outcome::BadImage(e)),
        }
    } else {
        return Ok(Outcome::Unsuitable);
    };
    if data.len() >= input.len() {
        return Ok(Outcome::NotSmaller);
    }
    Ok(Outcome::Transcoded { format, data })
}

/// Whether the image has more than one frame (its first frame alone would be wrong).
fn is_animated(format: ImageFormat, input: &[u8]) -> image::ImageResult<bool> {
    Ok(match format {
        ImageFormat::Gif => {
            GifDecoder::new(Cursor::new(input))?
                .into_frames()
                .take(2)
                .count()
                > 1
        }
        ImageFormat::Png => PngDecoder::new(Cursor::new(input))?.is_apng()?,
        ImageFormat::WebP => WebPDecoder::new(Cursor::new(input))?.has_animation(),
        _ => false,
    })
}

/// The image scaled down to fit `max_width` x `max_height` (0: no limit), aspect kept.
fn fit(image: DynamicImage, max_width: u32, max_height: u32) -> DynamicImage {
    let w = if max_width == 0 { u32::MAX } else { max_width };
    let h = if max_height == 0 {
        u32::MAX
    } else {
        max_height
    };
    if image.width() <= w && image.height() <= h {
        return image;
    }
    image.resize(w, h, FilterType::Triangle)
}

/// Baseline JPEG, 4:2:0 below quality 90, by `jpeg-encoder` (several times faster
/// than `image`'s own encoder on these sizes: AVX2 where the CPU has it).
fn encode_jpeg(image: &DynamicImage, quality: u8) -> Result<Vec<u8>, String> {
    let rgb = image.to_rgb8();
    let too_wide = |_| format!("{}x{} is too large for JPEG", rgb.width(), rgb.height());
    let width = u16::try_from(rgb.width()).map_err(too_wide)?;
    let height = u16::try_from(rgb.height()).map_err(too_wide)?;
    let mut out = Vec::new();
    jpeg_encoder::Encoder::new(&mut out, quality.clamp(1, 100))
        .encode(&rgb, width, height, jpeg_encoder::ColorType::Rgb)
        .map_err(|e| format!("JPEG encoder: {e}"))?;
    Ok(out)
}

/// libwebp's effort, 0 (fastest) to 6: 2 instead of its default 4 costs a few
/// percent of size on small photographs and saves a large share of the encoding time.
const WEBP_METHOD: i32 = 2;

fn encode_webp(image: &DynamicImage, opaque: bool, quality: u8) -> Result<Vec<u8>, String> {
    let mut config = webp::WebPConfig::new().map_err(|()| "libwebp: no default configuration")?;
    config.quality = f32::from(quality.clamp(1, 100));
    config.method = WEBP_METHOD;
    let encoded = if opaque {
        let rgb = image.to_rgb8();
        webp::Encoder::from_rgb(&rgb, rgb.width(), rgb.height()).encode_advanced(&config)
    } else {
        let rgba = image.to_rgba8();
        webp::Encoder::from_rgba(&rgba, rgba.width(), rgba.height()).encode_advanced(&config)
    };
    encoded
        .map(|m| m.to_vec())
        .map_err(|e| format!("libwebp: {e:?}"))
}
