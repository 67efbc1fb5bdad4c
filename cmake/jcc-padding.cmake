# Intel's JCC erratum: on the cores it concerns (Skylake to Cascade Lake and
# their kin) the microcode that fixes it keeps out of the decoded-instruction
# cache every 32-byte block in which a jump, or a macro-fused compare and jump,
# crosses or ends at the block's boundary. Such a block is decoded again each
# time it runs, so a hot loop's speed comes to depend on where the linker put
# it. Measured on a Cascade Lake VM: weft_yield 39 -> 33 ns a yield with the
# padding below; the fairness benchmark's work loop 1.6x slower in one
# placement than in another. The assembler can keep jumps off those boundaries
# (prefixes on the instructions before a jump first, no-ops only where they do
# not suffice: a callgrind count of weft's hand-off is the same with and
# without). Go's assembler does so by default; weft pads its library, its
# programs and the C, C++ and Rust peers built here (bench/peers/rust/
# .cargo/config.toml), so that every program measured side by side is laid out
# by the same rule.
#
# weft_jcc_padding(<lang>...) adds the option, on x86-64 only, for each given
# language whose compiler takes it: clang spells it
# -mbranches-within-32B-boundaries, GCC passes it to the assembler with -Wa,.
# ASM is given the C compiler's spelling (the same driver assembles .S files).
# WEFT_JCC_PADDING_CLANG is clang's spelling on x86-64 (empty elsewhere), for
# programs compiled by custom commands.
include(CheckCCompilerFlag)
include(CheckCXXCompilerFlag)

if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(WEFT_JCC_PADDING_CLANG -mbranches-within-32B-boundaries)
else()
  set(WEFT_JCC_PADDING_CLANG "")
endif()

function(weft_jcc_padding)
  if(NOT WEFT_JCC_PADDING_CLANG)
    return()
  endif()
  foreach(lang IN LISTS ARGN)
    if(lang STREQUAL "ASM")
      continue()
    endif()
    foreach(flag -mbranches-within-32B-boundaries -Wa,-mbranches-within-32B-boundaries)
      string(MAKE_C_IDENTIFIER "WEFT_JCC_${lang}_${flag}" ok)
      if(lang STREQUAL "C")
        check_c_compiler_flag(${flag} ${ok})
      else()
        check_cxx_compiler_flag(${flag} ${ok})
      endif()
      if(${ok})
        add_compile_options($<$<COMPILE_LANGUAGE:${lang}>:${flag}>)
        if(lang STREQUAL "C" AND "ASM" IN_LIST ARGN)
          add_compile_options($<$<COMPILE_LANGUAGE:ASM>:${flag}>)
        endif()
        break()
      endif()
    endforeach()
  endforeach()
endfunction()
