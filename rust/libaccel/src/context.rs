//! Contexts: the backend, threads and limits every call runs with.
use crate::error::{check, Result};
use libaccel_sys as sys;
use std::ffi::CStr;
use std::ptr::NonNull;

/// Which backend runs the stages of a context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// CUDA when a usable device exists, else the CPU.
    Auto,
    /// The OpenMP CPU path; always available.
    Cpu,
    /// An NVIDIA GPU through CUDA.
    Cuda,
}

impl Backend {
    fn raw(self) -> sys::accel_backend_kind {
        match self {
            Backend::Auto => sys::accel_backend_kind::ACCEL_BACKEND_AUTO,
            Backend::Cpu => sys::accel_backend_kind::ACCEL_BACKEND_CPU,
            Backend::Cuda => sys::accel_backend_kind::ACCEL_BACKEND_CUDA,
        }
    }
}

/// Which saved files reach the disk (fsync) before they replace their target
/// (`accel_sync_policy`). Every save is atomic whatever the policy: a complete
/// file or the previous one, never a partial one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SyncPolicy {
    /// Index files only (the default): images, arrays and transform files are
    /// replaced atomically but not synced.
    #[default]
    Index,
    /// Every save, and the directory entry that names it.
    All,
    /// No save.
    None,
}

impl SyncPolicy {
    fn raw(self) -> sys::accel_sync_policy {
        match self {
            SyncPolicy::Index => sys::accel_sync_policy::ACCEL_SYNC_INDEX,
            SyncPolicy::All => sys::accel_sync_policy::ACCEL_SYNC_ALL,
            SyncPolicy::None => sys::accel_sync_policy::ACCEL_SYNC_NONE,
        }
    }
}

/// How a context is made (`accel_ctx_options`); `Default` gives the library's
/// defaults. The environment (`ACCEL_BACKEND`, `ACCEL_LOG`) still overrides
/// the backend and log level, as `accel_ctx_create` documents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContextOptions {
    /// Default [`Backend::Auto`].
    pub backend: Backend,
    /// CUDA device index, default 0.
    pub device: i32,
    /// Rerun a failed GPU stage on the CPU (default true); false returns the GPU's error.
    pub allow_fallback: bool,
    /// CPU threads, 0 (default) for all.
    pub cpu_threads: i32,
    /// Device memory the context may hold, in bytes; 0 (default) for 90 % of what is free.
    pub device_memory_budget: u64,
    /// The largest image or raster a loader accepts, in pixels; 0 for the library's default.
    pub max_pixels: u64,
    /// Which saves are synced to the disk; default [`SyncPolicy::Index`].
    pub sync: SyncPolicy,
}

impl Default for ContextOptions {
    fn default() -> Self {
        ContextOptions {
            backend: Backend::Auto,
            device: 0,
            allow_fallback: true,
            cpu_threads: 0,
            device_memory_budget: 0,
            max_pixels: 0,
            sync: SyncPolicy::Index,
        }
    }
}

/// A libaccel context (`accel_ctx`), destroyed on drop. It may be shared by
/// threads (`&Context` is `Sync`): the library serializes what must be.
#[derive(Debug)]
pub struct Context {
    ptr: NonNull<sys::accel_ctx>,
}

// The C contract: every function taking a context may be called from several
// threads at once, except accel_ctx_destroy, which Drop's `&mut self` excludes.
unsafe impl Send for Context {}
unsafe impl Sync for Context {}

impl Context {
    /// A context with the default options (the GPU when one is usable).
    ///
    /// ```
    /// let ctx = libaccel::Context::new().unwrap();
    /// assert!(ctx.cpu_threads().unwrap() >= 1);
    /// ```
    pub fn new() -> Result<Self> {
        Self::with_options(&ContextOptions::default())
    }

    /// A context on the CPU backend.
    pub fn cpu() -> Result<Self> {
        Self::with_options(&ContextOptions { backend: Backend::Cpu, ..ContextOptions::default() })
    }

    /// A context with these options.
    pub fn with_options(options: &ContextOptions) -> Result<Self> {
        let mut o = sys::accel_ctx_options::default();
        check(unsafe { sys::accel_ctx_options_init(&mut o, std::mem::size_of_val(&o)) }, std::ptr::null())?;
        o.backend = options.backend.raw();
        o.device = options.device;
        o.fallback = if options.allow_fallback {
            sys::accel_fallback_policy::ACCEL_FALLBACK_ALLOW
        } else {
            sys::accel_fallback_policy::ACCEL_FALLBACK_DENY
        };
        o.cpu_threads = options.cpu_threads;
        o.device_memory_budget = options.device_memory_budget;
        o.max_pixels = options.max_pixels;
        o.sync = options.sync.raw();
        let mut ptr = std::ptr::null_mut();
        check(unsafe { sys::accel_ctx_create(&o, &mut ptr) }, std::ptr::null())?;
        Ok(Context { ptr: NonNull::new(ptr).expect("accel_ctx_create succeeded without a context") })
    }

    fn info(&self) -> Result<sys::accel_ctx_info> {
        let mut info = sys::accel_ctx_info::default();
        check(unsafe { sys::accel_ctx_info_init(&mut info, std::mem::size_of_val(&info)) }, std::ptr::null())?;
        self.check(unsafe { sys::accel_ctx_query(self.raw(), &mut info) })?;
        Ok(info)
    }

    /// The backend that runs this context's stages (never [`Backend::Auto`]).
    pub fn backend(&self) -> Result<Backend> {
        Ok(if self.info()?.backend == sys::accel_backend_kind::ACCEL_BACKEND_CUDA {
            Backend::Cuda
        } else {
            Backend::Cpu
        })
    }

    /// The number of threads CPU stages use.
    pub fn cpu_threads(&self) -> Result<i32> {
        Ok(self.info()?.cpu_threads)
    }

    /// The raw handle, for calls of `libaccel_sys` not wrapped here. It stays
    /// owned by this context.
    pub fn as_ptr(&self) -> *mut sys::accel_ctx {
        self.ptr.as_ptr()
    }

    pub(crate) fn raw(&self) -> *mut sys::accel_ctx {
        self.ptr.as_ptr()
    }

    /// `Ok(())`, or the error with this context's message.
    pub(crate) fn check(&self, status: sys::accel_status) -> Result<()> {
        check(status, self.raw())
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        unsafe { sys::accel_ctx_destroy(self.ptr.as_ptr()) }
    }
}

/// The loaded library's version, e.g. `"0.1.0"`.
pub fn version() -> &'static str {
    unsafe { CStr::from_ptr(sys::accel_version_string()) }.to_str().unwrap_or("")
}

/// How the loaded library was built (`cuda=yes ... openmp=yes ...`).
pub fn build_info() -> &'static str {
    unsafe { CStr::from_ptr(sys::accel_build_info()) }.to_str().unwrap_or("")
}
