//! The content and popularity models of the PolyMix-style workload: what each object
//! is (type, size, cacheability, how often it changes, the headers that say so) and
//! which object each request asks for. Everything is a pure function of the seed, so
//! the client and the origin simulator agree on every object without talking, and two
//! runs with the same seed send the same requests.

/// A small, fast, seedable generator (SplitMix64). The workload needs reproducibility,
/// not cryptographic quality.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit();
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Log-normal with the given mean (not median) and shape `sigma`.
    pub fn lognormal(&mut self, mean: f64, sigma: f64) -> f64 {
        let mu = mean.ln() - sigma * sigma / 2.0;
        (mu + sigma * self.normal()).exp()
    }
}

/// SplitMix64's finalizer: a good 64-bit mix, used to derive per-object generators.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Content classes, with PolyMix-4's shares of requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Image,
    Html,
    Download,
    Other,
}

impl Class {
    pub const ALL: [Class; 4] = [Class::Image, Class::Html, Class::Download, Class::Other];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            Class::Image => "image",
            Class::Html => "html",
            Class::Download => "download",
            Class::Other => "other",
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Class::Image => "image/jpeg",
            Class::Html => "text/html; charset=utf-8",
            Class::Download => "application/octet-stream",
            Class::Other => "application/javascript",
        }
    }
}

/// The mix: share of objects, and the size distribution of each class. Shares and
/// means follow PolyMix-4; the log-normal shapes are ours (PolyMix gives only means).
pub const MIX: [(Class, f64, SizeDist); 4] = [
    (Class::Image, 0.65, SizeDist::Exp(4_500.0)),
    (Class::Html, 0.15, SizeDist::Exp(8_500.0)),
    (Class::Download, 0.005, SizeDist::LogNormal(300_000.0, 0.8)),
    (Class::Other, 0.195, SizeDist::LogNormal(25_000.0, 1.0)),
];

/// Object sizes are clamped to this range: at least a few bytes of body, and at most
/// what the origin's shared body buffer holds.
pub const MIN_SIZE: usize = 32;
pub const MAX_SIZE: usize = 4 << 20;

#[derive(Clone, Copy, Debug)]
pub enum SizeDist {
    /// Exponential with this mean, in bytes.
    Exp(f64),
    /// Log-normal with this mean (bytes) and shape.
    LogNormal(f64, f64),
}

impl SizeDist {
    fn sample(self, rng: &mut Rng) -> usize {
        let v = match self {
            SizeDist::Exp(mean) => rng.exponential(mean),
            SizeDist::LogNormal(mean, sigma) => rng.lognormal(mean, sigma),
        };
        (v as usize).clamp(MIN_SIZE, MAX_SIZE)
    }

    fn mean(self) -> f64 {
        match self {
            SizeDist::Exp(m) | SizeDist::LogNormal(m, _) => m,
        }
    }
}

/// The mean object size the mix asks for (before clamping): 10,575 bytes.
pub fn mix_mean_size() -> f64 {
    MIX.iter().map(|(_, share, d)| share * d.mean()).sum()
}

/// How a response says whether and how long it may be cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freshness {
    /// `Cache-Control: no-store`.
    NoStore,
    /// `Cache-Control: private` (a shared cache must not store it).
    Private,
    /// `Cache-Control: max-age=N` with validators.
    MaxAge(u32),
    /// Validators only: a cache uses heuristic freshness (a fraction of the time since
    /// Last-Modified), then revalidates.
    Heuristic,
}

impl Freshness {
    pub fn cacheable(self) -> bool {
        matches!(self, Freshness::MaxAge(_) | Freshness::Heuristic)
    }
}

/// Share of cacheable objects (PolyMix-4: 80%).
pub const CACHEABLE: f64 = 0.8;

/// One object, derived from (seed, id) alone.
#[derive(Clone, Debug)]
pub struct Object {
    pub id: u64,
    pub class: Class,
    pub size: usize,
    pub freshness: Freshness,
    /// Seconds between changes of the content (a new ETag and Last-Modified); cacheable
    /// objects only. Changes are what make revalidations answer 200 instead of 304.
    pub change_period: f64,
    /// Where in its period the object is when the run starts, in seconds.
    pub phase: f64,
    /// Whether the object carries an ETag (all cacheable objects have Last-Modified).
    pub etag: bool,
    /// The virtual server (0-based) that serves it.
    pub server: usize,
}

impl Object {
    pub fn content_type(&self) -> &'static str {
        self.class.content_type()
    }

    /// The version current `t` seconds after the run started, and the Unix time (whole
    /// seconds) it was made at, given the run's start in Unix seconds.
    pub fn version_at(&self, start_unix: f64, t: f64) -> (u64, u64) {
        let p = self.change_period;
        let v = ((t + self.phase) / p).floor().max(0.0);
        let made = start_unix - self.phase + v * p;
        (v as u64, made.floor() as u64)
    }

    /// The path that names it on its server.
    pub fn path(&self) -> String {
        format!("/{}/{}", self.class.name(), self.id)
    }

    /// The object id in a path made by [`Object::path`].
    pub fn id_from_path(path: &str) -> Option<u64> {
        path.rsplit('/').next()?.parse().ok()
    }
}

/// The whole model: objects and the request stream, from one seed.
#[derive(Clone, Debug)]
pub struct Model {
    pub seed: u64,
    pub servers: usize,
    /// Probability that a request asks for an object requested before (PolyMix's
    /// recurrence). With 80% cacheable objects, 0.6875 gives an ideal hit ratio of 55%.
    pub recurrence: f64,
    /// Zipf exponent of popularity among the working set, by recency rank.
    pub zipf: f64,
    /// Objects that can be requested again: the most recently introduced ones.
    pub working_set: u64,
}

impl Model {
    pub fn new(seed: u64, servers: usize) -> Model {
        Model {
            seed,
            servers: servers.max(1),
            recurrence: 0.55 / CACHEABLE,
            zipf: 0.8,
            working_set: 100_000,
        }
    }

    /// The ideal hit ratio by construction: a repeated request to a cacheable object is
    /// a hit in an infinite cache that never sees changes; nothing else is.
    pub fn ideal_hit_ratio(&self) -> f64 {
        self.recurrence * CACHEABLE
    }

    pub fn object(&self, id: u64) -> Object {
        let mut rng = Rng::new(mix(self.seed ^ mix(id.wrapping_add(1))));
        let u = rng.unit();
        let mut acc = 0.0;
        let (class, dist) = MIX
            .iter()
            .find(|(_, share, _)| {
                acc += share;
                u < acc
            })
            .map(|(c, _, d)| (*c, *d))
            .unwrap_or((Class::Other, MIX[3].2));
        let size = dist.sample(&mut rng);
        let c = rng.unit();
        // 80% cacheable: of those, 40% with a long max-age (never stale in a short run),
        // 30% with a short one (stale within the run, then revalidated), 30% with
        // validators only (heuristic freshness). The 20% uncacheable split evenly.
        let freshness = if c < CACHEABLE * 0.4 {
            Freshness::MaxAge(3600)
        } else if c < CACHEABLE * 0.7 {
            Freshness::MaxAge(5 + (rng.unit() * 55.0) as u32)
        } else if c < CACHEABLE {
            Freshness::Heuristic
        } else if c < CACHEABLE + (1.0 - CACHEABLE) / 2.0 {
            Freshness::NoStore
        } else {
            Freshness::Private
        };
        // Changes: PolyMix objects change on a scale of hours; scaled to a run of
        // minutes, a mean of 2 minutes so that some revalidations find a new version.
        let change_period = rng.exponential(120.0).max(1.0);
        let phase = rng.unit() * change_period;
        let etag = rng.unit() < 0.7;
        let server = (mix(id ^ self.seed.rotate_left(17)) % self.servers as u64) as usize;
        Object {
            id,
            class,
            size,
            freshness,
            change_period,
            phase,
            etag,
            server,
        }
    }

    /// The request stream.
    pub fn requests(&self) -> Requests {
        Requests {
            rng: Rng::new(mix(self.seed ^ 0x5EED)),
            introduced: 0,
            model: self.clone(),
        }
    }
}

/// The sequence of object ids requested, in order: each request asks for a new object
/// with probability 1 − recurrence, else for one of the working set (the most recently
/// introduced objects) with Zipf popularity by recency (rank 1 = newest).
pub struct Requests {
    rng: Rng,
    introduced: u64,
    model: Model,
}

impl Requests {
    /// The next object id, and whether it was requested before.
    pub fn next_request(&mut self) -> (u64, bool) {
        if self.introduced == 0 || self.rng.unit() >= self.model.recurrence {
            let id = self.introduced;
            self.introduced += 1;
            return (id, false);
        }
        let n = self.introduced.min(self.model.working_set);
        let rank = zipf_rank(&mut self.rng, n, self.model.zipf);
        (self.introduced - rank, true)
    }
}

/// A rank in 1..=n with probability about proportional to rank^-s, by inverting the
/// continuous approximation of the Zipf CDF (cheap for a working set that grows).
fn zipf_rank(rng: &mut Rng, n: u64, s: f64) -> u64 {
    let u = rng.unit();
    let n1 = n as f64 + 1.0;
    let x = if (s - 1.0).abs() < 1e-9 {
        n1.powf(u)
    } else {
        let a = 1.0 - s;
        (1.0 + u * (n1.powf(a) - 1.0)).powf(1.0 / a)
    };
    (x.floor() as u64).clamp(1, n)
}

/// PolyMix-4's server think time, norm(2.5 s, 1 s), scaled by `scale` (0.02 gives a
/// mean of 50 ms) and clamped to [0.12 s, 5 s] × `scale` (2.4 to 100 ms at 0.02), so
/// that a miss costs tens of milliseconds and a hit does not.
pub fn response_delay(rng: &mut Rng, scale: f64) -> std::time::Duration {
    let secs = (2.5 + rng.normal()).clamp(0.12, 5.0) * scale;
    std::time::Duration::from_secs_f64(secs.max(0.0))
}

/// What an infinite cache that never sees a change would achieve on the first
/// `requests` requests of the stream: (hit ratio by request, by byte).
pub fn simulate_ideal(model: &Model, requests: usize) -> (f64, f64) {
    let mut seen = std::collections::HashSet::new();
    let mut stream = model.requests();
    let (mut hits, mut bytes, mut hit_bytes) = (0u64, 0u64, 0u64);
    for _ in 0..requests {
        let (id, _) = stream.next_request();
        let o = model.object(id);
        bytes += o.size as u64;
        if o.freshness.cacheable() && !seen.insert(id) {
            hits += 1;
            hit_bytes += o.size as u64;
        }
    }
    (
        hits as f64 / requests.max(1) as f64,
        hit_bytes as f64 / bytes.max(1) as f64,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_mean_is_near_11_kb_and_the_samples_follow_it() {
        assert!((mix_mean_size() - 10_575.0).abs() < 1.0);
        let model = Model::new(7, 10);
        let n = 200_000;
        let mut sum = 0.0;
        let mut per_class = [0usize; 4];
        for id in 0..n {
            let o = model.object(id);
            sum += o.size as f64;
            per_class[o.class.index()] += 1;
        }
        let mean = sum / n as f64;
        assert!((mean - 10_575.0).abs() < 600.0, "mean size {mean}");
        for (class, share, _) in MIX {
            let got = per_class[class.index()] as f64 / n as f64;
            assert!((got - share).abs() < 0.01 + share * 0.1, "{class:?}: {got}");
        }
    }

    #[test]
    fn about_80_percent_of_objects_are_cacheable() {
        let model = Model::new(1, 4);
        let n = 100_000;
        let cacheable = (0..n)
            .filter(|&i| model.object(i).freshness.cacheable())
            .count();
        let share = cacheable as f64 / n as f64;
        assert!((share - 0.8).abs() < 0.01, "{share}");
    }

    #[test]
    fn the_ideal_hit_ratio_is_55_percent() {
        let model = Model::new(42, 10);
        assert!((model.ideal_hit_ratio() - 0.55).abs() < 1e-9);
        let (by_request, by_byte) = simulate_ideal(&model, 200_000);
        assert!((by_request - 0.55).abs() < 0.01, "{by_request}");
        // Sizes do not depend on popularity, so bytes follow requests loosely (the
        // heavy tail of downloads makes it noisier).
        assert!((by_byte - 0.55).abs() < 0.08, "{by_byte}");
    }

    #[test]
    fn the_model_is_deterministic_for_a_seed_and_differs_between_seeds() {
        let a: Vec<u64> = {
            let mut r = Model::new(3, 5).requests();
            (0..1000).map(|_| r.next_request().0).collect()
        };
        let b: Vec<u64> = {
            let mut r = Model::new(3, 5).requests();
            (0..1000).map(|_| r.next_request().0).collect()
        };
        let c: Vec<u64> = {
            let mut r = Model::new(4, 5).requests();
            (0..1000).map(|_| r.next_request().0).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(
            format!("{:?}", Model::new(3, 5).object(17)),
            format!("{:?}", Model::new(3, 5).object(17))
        );
    }

    #[test]
    fn popularity_favours_recent_objects() {
        let mut rng = Rng::new(9);
        let n = 10_000;
        let ranks: Vec<u64> = (0..100_000).map(|_| zipf_rank(&mut rng, n, 0.8)).collect();
        assert!(ranks.iter().all(|&r| (1..=n).contains(&r)));
        let top10 = ranks.iter().filter(|&&r| r <= 10).count();
        let last10 = ranks.iter().filter(|&&r| r > n - 10).count();
        assert!(top10 > 20 * last10.max(1), "{top10} vs {last10}");
    }

    #[test]
    fn delays_are_milliseconds_around_50() {
        let mut rng = Rng::new(5);
        let d: Vec<f64> = (0..10_000)
            .map(|_| response_delay(&mut rng, 0.02).as_secs_f64() * 1000.0)
            .collect();
        let mean = d.iter().sum::<f64>() / d.len() as f64;
        assert!((mean - 50.0).abs() < 2.0, "{mean}");
        assert!(d.iter().all(|&ms| (2.39..=100.01).contains(&ms)));
    }

    #[test]
    fn versions_change_once_per_period_and_were_made_in_the_past() {
        let model = Model::new(11, 2);
        let o = (0..)
            .map(|i| model.object(i))
            .find(|o| o.freshness.cacheable())
            .unwrap();
        let start = 1_800_000_000.0;
        let (v0, made0) = o.version_at(start, 0.0);
        assert!(made0 as f64 <= start);
        let (v1, made1) = o.version_at(start, o.change_period + 0.001);
        assert_eq!(v1, v0 + 1);
        assert!(made1 > made0);
        assert_eq!(Object::id_from_path(&o.path()), Some(o.id));
    }
}
