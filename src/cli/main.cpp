// cli/main.cpp -- the `nvfp4` command: subcommands, and the one place errors become exit codes.
//   0 success; 1 an nvfp4::Error or other failure (one line on stderr); 2 bad command line.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "nvfp4/error.h"

int main(int argc, char** argv) {
  CLI::App app{"nvfp4: NVFP4 (E2M1 + E4M3 block scales) weight-only W4A16 toolkit"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "nvfp4 0.1.0");
  nvfp4::cli::add_quantize_command(app);
  nvfp4::cli::add_dequantize_command(app);
  nvfp4::cli::add_inspect_command(app);
  nvfp4::cli::add_bench_command(app);
  nvfp4::cli::add_compare_command(app);
  nvfp4::cli::add_tune_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "nvfp4: %s (see nvfp4 --help)\n", e.what());
    return 2;
  } catch (const nvfp4::Error& e) {
    std::fprintf(stderr, "nvfp4: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nvfp4: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
