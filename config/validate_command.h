#pragma once

// `infergate validate FILE`: loads and checks a configuration without starting anything
// (no socket is opened, no name resolved), for CI and for operators before a reload.

#include <iosfwd>
#include <span>
#include <string_view>

namespace infergate::config {

// Runs the command on `args`, the arguments after the word "validate" (so `{"demo.yaml"}`).
// A valid file: "<file>: OK" and a one-line summary on `out`, returns 0. An invalid or
// unreadable file: every error on `err`, one per line ("file:line:col: key: message"),
// returns 1. No FILE, more than one, or an unknown option: usage on `err`, returns 2.
// `-h` / `--help`: usage on `out`, returns 0.
int runValidateCommand(std::span<const std::string_view> args, std::ostream& out,
                       std::ostream& err);

}  // namespace infergate::config
