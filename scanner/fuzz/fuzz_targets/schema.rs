//! Fuzzes the schema parser: never panics; whatever parses prints to text that parses back to the
//! same schema.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xirang_scan::schema::FunctionSchema;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(schema) = FunctionSchema::parse(text) {
        let printed = schema.to_string();
        let again = FunctionSchema::parse(&printed).expect("printed schema must parse");
        assert_eq!(again.to_string(), printed, "printing is not a fixed point");
    }
});
