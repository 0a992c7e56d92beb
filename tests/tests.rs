//! The one integration test binary (see DESIGN §10): every module below drives rwfs through its
//! public API, the `rwfs` binary, or the mount.
