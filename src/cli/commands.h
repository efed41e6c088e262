// cli/commands.h -- one function per subcommand; each registers itself on the CLI11 app.
// Callbacks throw nvfp4::Error; main.cpp turns every error into one stderr line + exit code.
#pragma once

namespace CLI {
class App;
}

namespace nvfp4::cli {

void add_quantize_command(CLI::App& app);    // cmd_quantize.cpp
void add_dequantize_command(CLI::App& app);  // cmd_dequantize.cpp
void add_inspect_command(CLI::App& app);     // cmd_inspect.cpp
void add_bench_command(CLI::App& app);       // cmd_bench.cpp
void add_compare_command(CLI::App& app);     // cmd_compare.cpp (A/B comparison)
void add_tune_command(CLI::App& app);        // cmd_tune.cpp (CUDA tuning table)

}  // namespace nvfp4::cli
