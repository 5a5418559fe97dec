//! The SSE decoder: any chunking of a stream gives the same events as feeding it whole.
#![no_main]

use a2a_protocol::sse::Decoder;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, stream)) = data.split_first() else {
        return;
    };
    let mut whole = Decoder::default();
    let expected = whole.push(stream);
    let mut chunked = Decoder::default();
    let step = usize::from(cut).max(1);
    let got: Vec<String> = stream.chunks(step).flat_map(|c| chunked.push(c)).collect();
    assert_eq!(expected, got);
});
