//! The library stays mapped once loaded (`-z nodelete`): the double's exit
//! hook and the names it hands out must outlive a `dlclose`.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
}
