//! LATTE_REGION inside one process: a call that needs the region before
//! any span (here interning an ID) makes the region the variable names; the
//! program's own `latte_init_shared_region` before its first span then
//! replaces it (the ID carried over, the variable's region's name removed),
//! and a second call is refused as for any installed shared region.
//! (tests/cli/env_region.py runs whole programs with the variable.)

use latte::internals::recorder::{install_shared, intern_id};
use latte::internals::region::latte_region_config;
use latte::layout::*;
use latte::reader::Mapping;

fn id_names(name: &str) -> Vec<Vec<u8>> {
    let m = Mapping::open_shm(name.as_bytes()).unwrap();
    m.view().ids().unwrap().iter().map(|i| latte::name::name_bytes(&i.name).to_vec()).collect()
}

#[test]
fn a_programs_own_region_replaces_the_one_latte_region_named() {
    let pid = std::process::id();
    let from_env = format!("/latte-test-envr-{pid}");
    let own = format!("/latte-test-envr-own-{pid}");
    // Before anything in this process used latte (one test in this file).
    std::env::set_var("LATTE_REGION", &from_env);
    // SAFETY: a NUL-terminated literal.
    assert_ne!(unsafe { intern_id(c"envr.early".as_ptr()) }, LATTE_INVALID_ID);
    assert!(id_names(&from_env).contains(&b"envr.early".to_vec()), "the variable's region was made at the first need");

    let cfg = latte_region_config { slot_capacity: 4, samples_per_slot: 1024, ..Default::default() };
    install_shared(own.as_bytes(), &cfg).unwrap();
    assert_eq!(Mapping::open_shm(from_env.as_bytes()).err(), Some(latte::Error::Os(libc::ENOENT)), "the replaced region's name is gone");
    latte::internals::ffi::latte_start(c"envr.span".as_ptr(), LATTE_MODE_FAST);
    latte::internals::ffi::latte_stop(core::ptr::null(), LATTE_MODE_FAST);
    let ids = id_names(&own);
    assert!(ids.contains(&b"envr.early".to_vec()) && ids.contains(&b"envr.span".to_vec()), "{ids:?}");

    // The program's own region is not replaced again.
    let again = format!("/latte-test-envr-again-{pid}");
    assert_eq!(install_shared(again.as_bytes(), &cfg), Err(latte::Error::Os(libc::EALREADY)));
    latte::shm::unlink(own.as_bytes()).unwrap();
}
