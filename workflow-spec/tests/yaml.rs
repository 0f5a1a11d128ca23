//! The YAML front end: files lower onto the inline spec's model, errors land on the file.

use workflow_spec::parse::parse_str;
use workflow_spec::yaml::{check, Options};

fn seed() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/specs/user-onboarding.yaml")).unwrap()
}

#[test]
fn debug_seed() {
    let checked = check(&seed(), &Options::default());
    println!("{}", checked.text.clone().unwrap_or_default());
    for e in &checked.errors { println!("{}", e.render("user-onboarding.yaml", &seed())); }
    let _ = parse_str;
    panic!();
}
