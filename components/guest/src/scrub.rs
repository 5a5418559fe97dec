//! What lets a host serve one request after another on the same instance of a component: the
//! memory a request used holds none of its bytes once it answered.
//!
//! [`Zeroing`], the component's global allocator, zeroes every block it frees (a reallocation
//! moves into a new block and frees the old one), and [`stack`], called last in the request's
//! export, zeroes the shadow stack below its caller's frame. What is left between two requests
//! is the data segment, the allocator's bookkeeping and the frames of the export still running.

use std::alloc::{GlobalAlloc, Layout, System};

/// The system allocator, zeroing each block it frees.
pub struct Zeroing;

// SAFETY: every call is passed to the system allocator unchanged; a block is zeroed while it is
// still owned, before it is freed.
unsafe impl GlobalAlloc for Zeroing {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe {
            ptr.write_bytes(0, layout.size());
            // Writes just before a free are dead to the optimiser, which would drop them: the
            // black box may read the block.
            std::hint::black_box(ptr);
            System.dealloc(ptr, layout)
        }
    }
    // `realloc` keeps the trait's default (allocate, copy, dealloc): the system allocator's own
    // would free the old block, or the tail of a shrunk one, without zeroing it.
}

#[cfg(target_arch = "wasm32")]
unsafe extern "C" {
    /// The lowest address of the shadow stack (wasm-ld).
    static __stack_low: u8;
}

/// Zeroes the shadow stack below this call's frame: the frames of everything the request ran,
/// which a later request on the same instance would otherwise find in its memory. (Natively, in
/// the guests' unit tests, there is no shadow stack and nothing to do.)
#[inline(never)]
pub fn stack() {
    #[cfg(target_arch = "wasm32")]
    shadow_stack();
}

#[cfg(target_arch = "wasm32")]
#[inline(never)]
fn shadow_stack() {
    let here = 0u8;
    let top = std::hint::black_box(&here) as *const u8 as usize;
    // SAFETY: the shadow stack grows down from above this frame to `__stack_low`; below `here`
    // nothing is live (this is the innermost frame and `here` its only slot in memory).
    unsafe {
        let low = &raw const __stack_low as usize;
        if top > low {
            (low as *mut u8).write_bytes(0, top - low);
        }
    }
}
