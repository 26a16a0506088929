//! An exact Hamming similarity index and grouping of near-duplicates (`accel/index.h`).
use crate::context::Context;
use crate::error::{check, Error, Result, Status};
use crate::hash::c_path;
use libaccel_sys as sys;
use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::path::Path;
use std::ptr::NonNull;

/// How per-field thresholds combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// Every field within its threshold.
    All,
    /// At least one field within its threshold.
    Any,
}

/// The search algorithm; every one is exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Chosen from the sizes and thresholds.
    Auto,
    /// Every pair compared.
    BruteForce,
    /// Multi-index hashing (CPU).
    MultiIndex,
}

/// Thresholds (inclusive, one per field; missing fields take 0), the rule and
/// the algorithm of a search.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchOptions {
    /// Per field, inclusive: distance <= threshold matches.
    pub thresholds: Vec<u32>,
    /// Default [`Rule::All`].
    pub rule: Option<Rule>,
    /// Default [`Algorithm::Auto`].
    pub algorithm: Option<Algorithm>,
}

impl SearchOptions {
    /// These thresholds, rule All, algorithm Auto.
    pub fn within(thresholds: &[u32]) -> Self {
        SearchOptions { thresholds: thresholds.to_vec(), ..SearchOptions::default() }
    }

    fn raw(&self) -> Result<sys::accel_search_options> {
        let mut o = sys::accel_search_options::default();
        check(unsafe { sys::accel_search_options_init(&mut o, std::mem::size_of_val(&o)) }, std::ptr::null())?;
        if self.thresholds.len() > o.thresholds.len() {
            return Err(Error::invalid(format!("{} thresholds; an index has at most 8 fields", self.thresholds.len())));
        }
        o.thresholds[..self.thresholds.len()].copy_from_slice(&self.thresholds);
        o.rule = match self.rule.unwrap_or(Rule::All) {
            Rule::All => sys::accel_index_rule::ACCEL_INDEX_ALL,
            Rule::Any => sys::accel_index_rule::ACCEL_INDEX_ANY,
        };
        o.algorithm = match self.algorithm.unwrap_or(Algorithm::Auto) {
            Algorithm::Auto => sys::accel_index_algorithm::ACCEL_INDEX_AUTO,
            Algorithm::BruteForce => sys::accel_index_algorithm::ACCEL_INDEX_BRUTE_FORCE,
            Algorithm::MultiIndex => sys::accel_index_algorithm::ACCEL_INDEX_MULTI_INDEX,
        };
        Ok(o)
    }
}

/// Pairs found by a search: `first[i]`, `second[i]` and the distance of every
/// field, `distances[i * nfields + f]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pairs {
    /// The smaller id (self-join) or the query's number (range search).
    pub first: Vec<u64>,
    /// The larger id (self-join) or the entry's id (range search).
    pub second: Vec<u64>,
    /// Per pair, the distance of each field.
    pub distances: Vec<u32>,
    /// Fields per pair.
    pub nfields: usize,
}

impl Pairs {
    /// The number of pairs.
    pub fn len(&self) -> usize {
        self.first.len()
    }

    /// True when no pair was found.
    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    /// Copies the pairs out and destroys the handle.
    fn take(ptr: *mut sys::accel_pairs) -> Result<Pairs> {
        let (mut n, mut f, mut s, mut d, mut nf) = (0usize, std::ptr::null(), std::ptr::null(), std::ptr::null(), 0u32);
        let status = unsafe { sys::accel_pairs_view(ptr, &mut n, &mut f, &mut s, &mut d, &mut nf) };
        let out = check(status, std::ptr::null()).map(|_| unsafe {
            Pairs {
                first: slice(f, n).to_vec(),
                second: slice(s, n).to_vec(),
                distances: slice(d, n * nf as usize).to_vec(),
                nfields: nf as usize,
            }
        });
        unsafe { sys::accel_pairs_destroy(ptr) };
        out
    }
}

/// A slice of a library array (empty for NULL).
unsafe fn slice<'a, T>(p: *const T, n: usize) -> &'a [T] {
    if n == 0 || p.is_null() {
        &[]
    } else {
        std::slice::from_raw_parts(p, n)
    }
}

/// Copies groups out and destroys the handle.
fn take_groups(ptr: *mut sys::accel_groups) -> Result<Vec<Vec<u64>>> {
    let (mut n, mut off, mut mem) = (0usize, std::ptr::null(), std::ptr::null());
    let status = unsafe { sys::accel_groups_view(ptr, &mut n, &mut off, &mut mem) };
    let out = check(status, std::ptr::null()).map(|_| unsafe {
        let offsets = slice(off, if n > 0 { n + 1 } else { 0 });
        let members = slice(mem, offsets.last().copied().unwrap_or(0) as usize);
        offsets.windows(2).map(|w| members[w[0] as usize..w[1] as usize].to_vec()).collect()
    });
    unsafe { sys::accel_groups_destroy(ptr) };
    out
}

/// The connected components (two members or more) of the graph whose edges
/// are `(first[i], second[i])`: each group sorted, groups by their first member.
pub fn groups_from_pairs(first: &[u64], second: &[u64]) -> Result<Vec<Vec<u64>>> {
    if first.len() != second.len() {
        return Err(Error::invalid(format!("{} first and {} second ends", first.len(), second.len())));
    }
    let mut g = std::ptr::null_mut();
    check(
        unsafe { sys::accel_groups_from_pairs(first.len(), first.as_ptr(), second.as_ptr(), &mut g) },
        std::ptr::null(),
    )?;
    take_groups(g)
}

/// One entry of an index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its id.
    pub id: u64,
    /// Its codes: `nfields * bits / 64` words.
    pub codes: Vec<u64>,
    /// Its label, if any.
    pub label: Option<String>,
    /// Its stamp (0 if none).
    pub stamp: u64,
}

/// The k nearest entries of each query: `ids[q * k + j]`, `distances[q * k + j]`,
/// nearest first; missing results are id `u64::MAX`, distance `u32::MAX`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neighbours {
    /// Per query, k ids.
    pub ids: Vec<u64>,
    /// Per query, k distances.
    pub distances: Vec<u32>,
    /// Results per query.
    pub k: usize,
}

/// An index of binary codes (`accel_index`), searched with its context's
/// backend and destroyed on drop. It borrows its context, which therefore
/// outlives it. Searches take `&self` and may run from several threads at
/// once; changes take `&mut self`.
#[derive(Debug)]
pub struct Index<'ctx> {
    ptr: NonNull<sys::accel_index>,
    ctx: &'ctx Context,
}

unsafe impl Send for Index<'_> {}
unsafe impl Sync for Index<'_> {}

impl<'ctx> Index<'ctx> {
    /// An empty index of `nfields` codes of `bits` (64, 128 or 256) bits per entry.
    ///
    /// ```
    /// use libaccel::{Context, Index, SearchOptions};
    /// let ctx = Context::cpu().unwrap();
    /// let mut index = Index::new(&ctx, 64, 1).unwrap();
    /// index.add(&[1, 2, 3], &[0xff, 0xfe, 0xff00], None, None).unwrap();
    /// let pairs = index.self_join(&SearchOptions::within(&[1])).unwrap();
    /// assert_eq!((pairs.first, pairs.second), (vec![1], vec![2]));
    /// ```
    pub fn new(ctx: &'ctx Context, bits: u32, nfields: u32) -> Result<Self> {
        let mut o = sys::accel_index_options::default();
        check(unsafe { sys::accel_index_options_init(&mut o, std::mem::size_of_val(&o)) }, std::ptr::null())?;
        o.bits = bits;
        o.nfields = nfields;
        let mut p = std::ptr::null_mut();
        ctx.check(unsafe { sys::accel_index_create(ctx.raw(), &o, &mut p) })?;
        Ok(Index { ptr: NonNull::new(p).expect("accel_index_create succeeded without an index"), ctx })
    }

    /// An index saved by [`Index::save`].
    pub fn load(ctx: &'ctx Context, path: impl AsRef<Path>) -> Result<Self> {
        let c = c_path(path.as_ref())?;
        let mut p = std::ptr::null_mut();
        ctx.check(unsafe { sys::accel_index_load(ctx.raw(), c.as_ptr(), &mut p) })?;
        Ok(Index { ptr: NonNull::new(p).expect("accel_index_load succeeded without an index"), ctx })
    }

    fn raw(&self) -> *mut sys::accel_index {
        self.ptr.as_ptr()
    }

    fn shape(&self) -> (u32, u32, usize) {
        let (mut bits, mut nfields, mut count) = (0u32, 0u32, 0usize);
        unsafe { sys::accel_index_info(self.raw(), &mut bits, &mut nfields, &mut count) };
        (bits, nfields, count)
    }

    /// Bits per field.
    pub fn bits(&self) -> u32 {
        self.shape().0
    }

    /// Fields (codes) per entry.
    pub fn nfields(&self) -> u32 {
        self.shape().1
    }

    /// Words of one entry's codes (or of one query).
    pub fn words_per_entry(&self) -> usize {
        let (bits, nfields, _) = self.shape();
        (bits / 64 * nfields) as usize
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.shape().2
    }

    /// True without entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn check_words(&self, words: usize, n: usize, what: &str) -> Result<()> {
        let per = self.words_per_entry();
        if Some(words) != n.checked_mul(per) {
            return Err(Error::invalid(format!("{what}: {words} words for {n} entries of {per} words each")));
        }
        Ok(())
    }

    /// Add entries, all or none: `codes` holds `words_per_entry()` words per
    /// id; labels and stamps, when given, one per id.
    pub fn add(&mut self, ids: &[u64], codes: &[u64], labels: Option<&[&str]>, stamps: Option<&[u64]>) -> Result<()> {
        self.check_words(codes.len(), ids.len(), "codes")?;
        if labels.map_or(false, |l| l.len() != ids.len()) || stamps.map_or(false, |s| s.len() != ids.len()) {
            return Err(Error::invalid("labels and stamps need one per id"));
        }
        let owned = labels
            .unwrap_or(&[])
            .iter()
            .map(|l| CString::new(*l).map_err(|_| Error::invalid(format!("label {l:?} holds a NUL byte"))))
            .collect::<Result<Vec<_>>>()?;
        let ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        let status = unsafe {
            sys::accel_index_add(
                self.raw(),
                ids.len(),
                ids.as_ptr(),
                codes.as_ptr(),
                if labels.is_some() { ptrs.as_ptr() } else { std::ptr::null() },
                stamps.map_or(std::ptr::null(), |s| s.as_ptr()),
            )
        };
        self.ctx.check(status)
    }

    /// Remove the entries with these ids (others are ignored); how many were removed.
    pub fn remove(&mut self, ids: &[u64]) -> Result<usize> {
        let mut removed = 0usize;
        self.ctx.check(unsafe { sys::accel_index_remove(self.raw(), ids.len(), ids.as_ptr(), &mut removed) })?;
        Ok(removed)
    }

    /// The entry at `position` (0 .. len()).
    pub fn get(&self, position: usize) -> Result<Entry> {
        let mut codes = vec![0u64; self.words_per_entry()];
        let (mut id, mut label, mut stamp) = (0u64, std::ptr::null(), 0u64);
        self.ctx.check(unsafe {
            sys::accel_index_get(self.raw(), position, &mut id, codes.as_mut_ptr(), &mut label, &mut stamp)
        })?;
        let label =
            if label.is_null() { None } else { Some(unsafe { CStr::from_ptr(label) }.to_string_lossy().into_owned()) };
        Ok(Entry { id, codes, label, stamp })
    }

    /// The position of an id, if it is in the index.
    pub fn find(&self, id: u64) -> Option<usize> {
        let mut position = 0usize;
        let s = unsafe { sys::accel_index_find(self.raw(), id, &mut position) };
        if s == Status::ACCEL_OK {
            Some(position)
        } else {
            None
        }
    }

    /// The free-form string saved with the index ("" if none).
    pub fn meta(&self) -> Result<String> {
        let mut p = std::ptr::null();
        self.ctx.check(unsafe { sys::accel_index_get_meta(self.raw(), &mut p) })?;
        Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    /// Set the free-form string saved with the index (at most 4095 bytes).
    pub fn set_meta(&mut self, meta: &str) -> Result<()> {
        let c = CString::new(meta).map_err(|_| Error::invalid("meta holds a NUL byte"))?;
        self.ctx.check(unsafe { sys::accel_index_set_meta(self.raw(), c.as_ptr()) })
    }

    /// Save to a file (atomically: a failed save keeps the previous file).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let c = c_path(path.as_ref())?;
        self.ctx.check(unsafe { sys::accel_index_save(self.raw(), c.as_ptr()) })
    }

    /// Every pair of entries within the thresholds, each once, smaller id first.
    pub fn self_join(&self, options: &SearchOptions) -> Result<Pairs> {
        let o = options.raw()?;
        let mut p = std::ptr::null_mut();
        self.ctx.check(unsafe { sys::accel_index_self_join(self.raw(), &o, &mut p) })?;
        Pairs::take(p)
    }

    /// For each query (`words_per_entry()` words each), every entry within the
    /// thresholds: first = the query's number, second = the entry's id.
    pub fn range(&self, queries: &[u64], options: &SearchOptions) -> Result<Pairs> {
        let per = self.words_per_entry();
        let nq = queries.len() / per.max(1);
        self.check_words(queries.len(), nq, "queries")?;
        let o = options.raw()?;
        let mut p = std::ptr::null_mut();
        self.ctx.check(unsafe { sys::accel_index_range(self.raw(), nq, queries.as_ptr(), &o, &mut p) })?;
        Pairs::take(p)
    }

    /// The `k` entries nearest to each query by the distance of `field`
    /// (ties: the smaller id first).
    pub fn knn(&self, queries: &[u64], k: u32, field: u32) -> Result<Neighbours> {
        let per = self.words_per_entry();
        let nq = queries.len() / per.max(1);
        self.check_words(queries.len(), nq, "queries")?;
        let total = nq.checked_mul(k as usize).ok_or_else(|| Error::invalid("too many results"))?;
        let mut ids = vec![0u64; total];
        let mut distances = vec![0u32; total];
        self.ctx.check(unsafe {
            sys::accel_index_knn(self.raw(), nq, queries.as_ptr(), k, field, ids.as_mut_ptr(), distances.as_mut_ptr())
        })?;
        Ok(Neighbours { ids, distances, k: k as usize })
    }

    /// The groups of near-duplicates: connected components of the self-join,
    /// members sorted, groups by their first member.
    pub fn groups(&self, options: &SearchOptions) -> Result<Vec<Vec<u64>>> {
        let o = options.raw()?;
        let mut g = std::ptr::null_mut();
        self.ctx.check(unsafe { sys::accel_index_group(self.raw(), &o, &mut g) })?;
        take_groups(g)
    }
}

impl Drop for Index<'_> {
    fn drop(&mut self) {
        unsafe { sys::accel_index_destroy(self.ptr.as_ptr()) }
    }
}
