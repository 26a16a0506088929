//! Errors: the library's status and message.
use libaccel_sys as sys;
use std::ffi::CStr;
use std::fmt;

/// A libaccel status code (`accel_status`): a newtype over the C integer, so
/// codes added by a newer library are values too. Constants:
/// `Status::ACCEL_ERR_INVALID_ARG`, `Status::ACCEL_ERR_DECODE`, ...
pub type Status = sys::accel_status;

/// A failed call: the library's status and the message it recorded
/// (`accel_last_error`), or a status and message of this crate's own checks
/// (a slice whose length does not match its shape is `ACCEL_ERR_INVALID_ARG`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// What failed, as the C function returned it.
    pub status: Status,
    /// The library's message, e.g. `accel_svf_shadows: pixel_size 0 must be positive and finite`.
    pub message: String,
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// The enumerator's name of a status, e.g. `"ACCEL_ERR_DECODE"`
/// (`"ACCEL_ERR_UNKNOWN"` for a code this library does not know).
pub fn status_name(status: Status) -> &'static str {
    // static storage, never NULL
    unsafe { CStr::from_ptr(sys::accel_status_string(status)) }.to_str().unwrap_or("ACCEL_ERR_UNKNOWN")
}

impl Error {
    /// The status's enumerator name, e.g. `"ACCEL_ERR_INVALID_ARG"`.
    pub fn name(&self) -> &'static str {
        status_name(self.status)
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error { status: Status::ACCEL_ERR_INVALID_ARG, message: message.into() }
    }

    /// The error of a call that returned `status`, with the message the
    /// library kept for this thread and `ctx` (NULL for calls without one).
    pub(crate) fn last(status: Status, ctx: *const sys::accel_ctx) -> Self {
        let message = unsafe { CStr::from_ptr(sys::accel_last_error(ctx)) }.to_string_lossy().into_owned();
        Error { status, message }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name(), self.message)
    }
}

impl std::error::Error for Error {}

/// `Ok(())` for ACCEL_OK, else the error with the message of `ctx`.
pub(crate) fn check(status: Status, ctx: *const sys::accel_ctx) -> Result<()> {
    if status == Status::ACCEL_OK {
        Ok(())
    } else {
        Err(Error::last(status, ctx))
    }
}
