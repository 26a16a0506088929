//! Perceptual image hashes bit-exact with Python's `imagehash` (`accel/hash.h`).
use crate::array::view;
use crate::context::Context;
use crate::error::{check, Error, Result, Status};
use libaccel_sys as sys;
use std::ffi::{c_void, CStr, CString};
use std::os::raw::c_char;
use std::path::Path;
use std::str::FromStr;

/// A kind of hash, as imagehash names its functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HashKind {
    /// `average_hash`
    Ahash,
    /// `dhash`
    Dhash,
    /// `dhash_vertical`
    DhashVertical,
    /// `phash`
    Phash,
    /// `whash` (haar)
    Whash,
    /// `colorhash`
    Colorhash,
}

const KINDS: [HashKind; 6] =
    [HashKind::Ahash, HashKind::Dhash, HashKind::DhashVertical, HashKind::Phash, HashKind::Whash, HashKind::Colorhash];

impl HashKind {
    fn raw(self) -> sys::accel_hash_kind {
        sys::accel_hash_kind(self as u32)
    }

    /// `"ahash"`, `"dhash"`, `"dhash_vertical"`, `"phash"`, `"whash"`, `"colorhash"`.
    pub fn name(self) -> &'static str {
        unsafe { CStr::from_ptr(sys::accel_hash_kind_name(self.raw())) }.to_str().unwrap_or("unknown")
    }

    /// Bits of one hash of this kind at `hash_size` (colorhash: 14 x `color_binbits`).
    pub fn bits(self, hash_size: i32, color_binbits: i32) -> Result<u32> {
        let mut n = 0u32;
        check(unsafe { sys::accel_hash_bits(self.raw(), hash_size, color_binbits, &mut n) }, std::ptr::null())?;
        Ok(n)
    }
}

impl FromStr for HashKind {
    type Err = Error;
    /// A kind's name in any case, or imagehash's function name (`average_hash`).
    fn from_str(s: &str) -> Result<Self> {
        let c = CString::new(s).map_err(|_| Error::invalid("a hash kind name with a NUL byte"))?;
        let mut k = sys::accel_hash_kind(0);
        check(unsafe { sys::accel_hash_kind_from_string(c.as_ptr(), &mut k) }, std::ptr::null())?;
        KINDS.iter().copied().find(|x| x.raw() == k).ok_or_else(|| Error::invalid(format!("hash kind {s:?}")))
    }
}

/// What a batch computes (`accel_hash_options`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashOptions {
    /// The kinds, each once; default ahash, dhash, phash, whash.
    pub kinds: Vec<HashKind>,
    /// imagehash's hash_size, default 8 (64-bit hashes).
    pub hash_size: i32,
    /// colorhash's binbits, default 3.
    pub color_binbits: i32,
    /// Decode large JPEGs at a reduced scale: faster, not bit-exact. Default false.
    pub fast: bool,
    /// Images with more pixels fail with `ACCEL_ERR_LIMIT`; 0 for the default.
    pub max_pixels: u64,
}

impl Default for HashOptions {
    fn default() -> Self {
        HashOptions {
            kinds: vec![HashKind::Ahash, HashKind::Dhash, HashKind::Phash, HashKind::Whash],
            hash_size: 8,
            color_binbits: 3,
            fast: false,
            max_pixels: 0,
        }
    }
}

impl HashOptions {
    /// The default sizes with these kinds.
    pub fn kinds(kinds: &[HashKind]) -> Self {
        HashOptions { kinds: kinds.to_vec(), ..HashOptions::default() }
    }

    fn raw(&self) -> Result<(sys::accel_hash_options, usize)> {
        let mut o = sys::accel_hash_options::default();
        check(unsafe { sys::accel_hash_options_init(&mut o, std::mem::size_of_val(&o)) }, std::ptr::null())?;
        if self.kinds.is_empty() || self.kinds.len() > o.kinds.len() {
            return Err(Error::invalid(format!("{} hash kinds; 1 to 6 expected", self.kinds.len())));
        }
        o.nkinds = self.kinds.len() as u32;
        for (slot, k) in o.kinds.iter_mut().zip(&self.kinds) {
            *slot = k.raw();
        }
        o.hash_size = self.hash_size;
        o.color_binbits = self.color_binbits;
        o.fast = self.fast as i32;
        o.max_pixels = self.max_pixels;
        let mut slot = 0usize;
        check(unsafe { sys::accel_hash_slot_bytes(&o, &mut slot) }, std::ptr::null())?;
        Ok((o, slot))
    }
}

/// A decoded 8-bit image: `pixels` holds `height x width x channels` bytes in
/// C order (1: L, 2: LA, 3: RGB, 4: RGBA), hashed as imagehash hashes
/// `PIL.Image.fromarray`.
#[derive(Clone, Copy, Debug)]
pub struct Image<'a> {
    /// The pixels, row by row, channels interleaved.
    pub pixels: &'a [u8],
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// Channels per pixel: 1 to 4.
    pub channels: usize,
}

/// The hashes of a batch: for every input, one hash per kind, or the reason
/// that input failed (one failing input never fails the batch).
#[derive(Clone, Debug)]
pub struct Hashes {
    kinds: Vec<HashKind>,
    nbits: Vec<u32>,
    slot: usize,
    data: Vec<u8>,
    statuses: Vec<Status>,
    messages: Vec<Option<String>>,
}

impl Hashes {
    /// The number of inputs.
    pub fn len(&self) -> usize {
        self.statuses.len()
    }

    /// True for an empty batch.
    pub fn is_empty(&self) -> bool {
        self.statuses.is_empty()
    }

    /// The kinds computed, in order.
    pub fn kinds(&self) -> &[HashKind] {
        &self.kinds
    }

    /// Bits of the hashes of `kind`, if it was computed.
    pub fn bits(&self, kind: HashKind) -> Option<u32> {
        self.kinds.iter().position(|&k| k == kind).map(|i| self.nbits[i])
    }

    /// `Ok(())` when input `i` was hashed, else its status and message.
    pub fn result(&self, i: usize) -> Result<()> {
        let status = *self.statuses.get(i).ok_or_else(|| Error::invalid(format!("input {i} out of range")))?;
        if status == Status::ACCEL_OK {
            return Ok(());
        }
        let message = self.messages[i].clone().unwrap_or_else(|| crate::error::status_name(status).to_string());
        Err(Error { status, message })
    }

    /// The hash of input `i` and `kind`, packed MSB first (`ceil(bits / 8)`
    /// bytes); None when the input failed or the kind was not computed.
    pub fn get(&self, i: usize, kind: HashKind) -> Option<&[u8]> {
        let k = self.kinds.iter().position(|&x| x == kind)?;
        if *self.statuses.get(i)? != Status::ACCEL_OK {
            return None;
        }
        let at = (i * self.kinds.len() + k) * self.slot;
        Some(&self.data[at..at + (self.nbits[k] as usize + 7) / 8])
    }

    /// imagehash's `str(hash)` of input `i` and `kind`.
    pub fn hex(&self, i: usize, kind: HashKind) -> Option<String> {
        let bits = self.bits(kind)?;
        to_hex(self.get(i, kind)?, bits).ok()
    }

    /// The first 64 bits of the hash as a word, its first bit the most
    /// significant: what [`crate::Index`] codes hold (for 64-bit hashes,
    /// `int(str(hash), 16)`).
    pub fn word(&self, i: usize, kind: HashKind) -> Option<u64> {
        let mut w = [0u8; 8];
        let h = self.get(i, kind)?;
        let n = h.len().min(8);
        w[..n].copy_from_slice(&h[..n]);
        Some(u64::from_be_bytes(w))
    }
}

unsafe extern "C" fn on_error(user: *mut c_void, index: usize, _status: sys::accel_status, message: *const c_char) {
    // called on this thread during the batch; never unwinds
    let messages = &mut *(user as *mut Vec<Option<String>>);
    if let Some(m) = messages.get_mut(index) {
        *m = Some(CStr::from_ptr(message).to_string_lossy().into_owned());
    }
}

impl Context {
    fn hash_batch<F>(&self, n: usize, options: &HashOptions, run: F) -> Result<Hashes>
    where
        F: Fn(*const sys::accel_hash_options, *mut u8, usize, *mut sys::accel_status) -> sys::accel_status,
    {
        let (mut o, slot) = options.raw()?;
        let mut nbits = Vec::with_capacity(options.kinds.len());
        for k in &options.kinds {
            nbits.push(k.bits(options.hash_size, options.color_binbits)?);
        }
        let mut messages: Vec<Option<String>> = vec![None; n];
        o.on_error = Some(on_error);
        o.error_user = &mut messages as *mut Vec<Option<String>> as *mut c_void;
        let total = n.checked_mul(options.kinds.len() * slot).ok_or_else(|| Error::invalid("batch too large"))?;
        let mut data = vec![0u8; total];
        let mut statuses = vec![Status::ACCEL_OK; n];
        self.check(run(&o, data.as_mut_ptr(), slot, statuses.as_mut_ptr()))?;
        Ok(Hashes { kinds: options.kinds.clone(), nbits, slot, data, statuses, messages })
    }

    /// Hash image files (JPEG or PNG).
    ///
    /// ```no_run
    /// use libaccel::{Context, HashKind, HashOptions};
    /// let ctx = Context::new().unwrap();
    /// let h = ctx.hash_files(&["a.jpg", "b.png"], &HashOptions::kinds(&[HashKind::Dhash])).unwrap();
    /// println!("{:?}", h.hex(0, HashKind::Dhash));
    /// ```
    pub fn hash_files<P: AsRef<Path>>(&self, paths: &[P], options: &HashOptions) -> Result<Hashes> {
        let owned = paths.iter().map(|p| c_path(p.as_ref())).collect::<Result<Vec<_>>>()?;
        let ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        self.hash_batch(ptrs.len(), options, |o, h, slot, st| unsafe {
            sys::accel_hash_files(self.raw(), ptrs.as_ptr(), ptrs.len(), o, h, slot, st)
        })
    }

    /// Hash encoded files held in memory (JPEG or PNG bytes).
    pub fn hash_buffers<B: AsRef<[u8]>>(&self, buffers: &[B], options: &HashOptions) -> Result<Hashes> {
        let ptrs: Vec<*const c_void> = buffers.iter().map(|b| b.as_ref().as_ptr() as *const c_void).collect();
        let sizes: Vec<usize> = buffers.iter().map(|b| b.as_ref().len()).collect();
        self.hash_batch(ptrs.len(), options, |o, h, slot, st| unsafe {
            sys::accel_hash_buffers(self.raw(), ptrs.as_ptr(), sizes.as_ptr(), ptrs.len(), o, h, slot, st)
        })
    }

    /// Hash decoded images.
    pub fn hash_images(&self, images: &[Image<'_>], options: &HashOptions) -> Result<Hashes> {
        let views = images
            .iter()
            .enumerate()
            .map(|(i, im)| view(im.pixels, &[im.height, im.width, im.channels], &format!("image {i}")))
            .collect::<Result<Vec<_>>>()?;
        self.hash_batch(views.len(), options, |o, h, slot, st| unsafe {
            sys::accel_hash_arrays(self.raw(), views.as_ptr(), views.len(), o, h, slot, st)
        })
    }
}

#[cfg(unix)]
pub(crate) fn c_path(p: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(p.as_os_str().as_bytes()).map_err(|_| Error::invalid(format!("path {p:?} holds a NUL byte")))
}

#[cfg(not(unix))]
pub(crate) fn c_path(p: &Path) -> Result<CString> {
    let s = p.to_str().ok_or_else(|| Error::invalid(format!("path {p:?} is not valid Unicode")))?;
    CString::new(s).map_err(|_| Error::invalid(format!("path {p:?} holds a NUL byte")))
}

/// imagehash's hex string of a packed hash of `bits` bits.
pub fn to_hex(hash: &[u8], bits: u32) -> Result<String> {
    if hash.len() < (bits as usize + 7) / 8 {
        return Err(Error::invalid(format!("{} bytes hold no {bits}-bit hash", hash.len())));
    }
    let mut out = vec![0u8; (bits as usize + 3) / 4 + 1];
    check(
        unsafe { sys::accel_hash_to_hex(hash.as_ptr(), bits, out.as_mut_ptr() as *mut c_char, out.len()) },
        std::ptr::null(),
    )?;
    out.pop();
    Ok(String::from_utf8(out).expect("hex digits"))
}

/// The packed hash of imagehash's hex string of a `bits`-bit hash.
pub fn from_hex(hex: &str, bits: u32) -> Result<Vec<u8>> {
    let c = CString::new(hex).map_err(|_| Error::invalid("a hex string with a NUL byte"))?;
    let mut out = vec![0u8; (bits as usize + 7) / 8];
    check(unsafe { sys::accel_hash_from_hex(c.as_ptr(), bits, out.as_mut_ptr(), out.len()) }, std::ptr::null())?;
    Ok(out)
}

/// The Hamming distance of two packed `bits`-bit hashes (imagehash's `a - b`).
pub fn distance(a: &[u8], b: &[u8], bits: u32) -> Result<u32> {
    let need = (bits as usize + 7) / 8;
    if a.len() < need || b.len() < need {
        return Err(Error::invalid(format!("hashes of {} and {} bytes; {bits} bits need {need}", a.len(), b.len())));
    }
    let mut d = 0u32;
    check(unsafe { sys::accel_hash_distance(a.as_ptr(), b.as_ptr(), bits, &mut d) }, std::ptr::null())?;
    Ok(d)
}
