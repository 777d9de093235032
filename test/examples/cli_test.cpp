#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "../../examples/common/cli.hpp"
#include "../common/files.hpp"

using examples::Cli;
namespace fs = std::filesystem;
using ptrain::test::contains;

BOOST_AUTO_TEST_SUITE(cli_test)

namespace {

Cli training_flags() {
  Cli cli("program", "a test");
  cli.integer_option("--epochs", 5, "epochs")
      .integer_option("--limit", 0, "first N only (0: all)", 0)
      .real_option("--lr", "0.001", "learning rate")
      .real_option("--val-fraction", "0.2", "held out", 0, 1)
      .choice_option("--compression", "fp32", {"fp32", "fp16", "bf16"}, "on the wire")
      .choice_option("--schedule", "1f1b", {"gpipe", "1f1b"}, "pipeline schedule")
      .option("--data", "dir", "a path");
  return cli;
}

// The message read() refuses args with; fails the test when it accepts them.
std::string refusal(const std::vector<std::string>& args) {
  Cli cli = training_flags();
  try {
    cli.read(args);
  } catch (const Cli::Error& e) {
    return e.what();
  }
  BOOST_FAIL("expected Cli::Error");
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(values_given_and_defaults_are_typed) {
  Cli cli = training_flags();
  BOOST_TEST((cli.read({"--epochs", "12", "--lr", "3e-4", "--compression", "bf16"}) == Cli::Parsed::run));
  BOOST_TEST(cli.integer("--epochs") == 12);
  BOOST_TEST(cli.integer("--limit") == 0);
  BOOST_TEST(cli.real("--lr") == 3e-4);
  BOOST_TEST(cli.real("--val-fraction") == 0.2);
  BOOST_TEST(cli.str("--compression") == "bf16");
  BOOST_TEST(cli.str("--data") == "dir");
  BOOST_TEST((training_flags().read({"--epochs", "1", "--help"}) == Cli::Parsed::help));
}

BOOST_AUTO_TEST_CASE(counts_are_whole_positive_and_in_range) {
  for (const std::string bad : {"1.5", "0", "-3", "4294967296", "99999999999999999999", "", "5x", " 5", "+5", "0x10"})
    BOOST_TEST(refusal({"--epochs", bad}) == "--epochs '" + bad + "': expected an integer from 1 to 2147483647");
  BOOST_TEST(refusal({"--limit", "-1"}) == "--limit '-1': expected an integer from 0 to 2147483647");
}

BOOST_AUTO_TEST_CASE(reals_parse_to_the_end_and_stay_in_range) {
  for (const std::string bad : {"0.1x", "", "nan", "inf", "1e999", "-0.5", " 1"})
    BOOST_TEST(refusal({"--lr", bad}) == "--lr '" + bad + "': expected a number of at least 0");
  BOOST_TEST(refusal({"--val-fraction", "1.5"}) == "--val-fraction '1.5': expected a number from 0 to 1");
}

// Whether or not the run would use it: --schedule means nothing without pipeline stages.
BOOST_AUTO_TEST_CASE(choices_are_checked_whether_used_or_not) {
  BOOST_TEST(refusal({"--compression", "fp8"}) == "--compression 'fp8': expected one of fp32, fp16, bf16");
  BOOST_TEST(refusal({"--schedule", "zigzag"}) == "--schedule 'zigzag': expected one of gpipe, 1f1b");
}

BOOST_AUTO_TEST_CASE(unknown_flags_and_missing_values_are_named) {
  BOOST_TEST(contains(refusal({"--epoch", "3"}), "unknown option '--epoch'"));
  BOOST_TEST(refusal({"--epochs"}) == "option '--epochs' needs a value");
}

BOOST_AUTO_TEST_CASE(a_switch_takes_no_value) {
  Cli off = training_flags(), on = training_flags();
  off.switch_option("--resume", "continue");
  on.switch_option("--resume", "continue");
  BOOST_TEST((off.read({"--epochs", "3"}) == Cli::Parsed::run));
  BOOST_TEST(!off.flag("--resume"));
  BOOST_TEST((on.read({"--resume", "--epochs", "3"}) == Cli::Parsed::run));
  BOOST_TEST(on.flag("--resume"));
  BOOST_TEST(on.integer("--epochs") == 3);
}

BOOST_AUTO_TEST_CASE(a_bad_default_is_refused_too) {
  Cli cli("program", "a test");
  cli.integer_option("--batch", 0, "a count whose default is wrong");
  BOOST_CHECK_THROW(cli.read({}), Cli::Error);
}

// The default log of an earlier run is kept: the next run takes NAME_2.csv, then NAME_3.csv.
BOOST_AUTO_TEST_CASE(a_default_output_never_overwrites_an_earlier_run) {
  const fs::path dir = ptrain::test::temp_dir("cli_test");
  const std::string log = (dir / "run.csv").string();
  const auto chosen = [&](const std::vector<std::string>& args) {
    Cli cli("program", "a test");
    cli.output_option("--csv", log, "per-epoch log");
    cli.read(args);
    return cli.str("--csv");
  };
  BOOST_TEST(chosen({}) == log);
  ptrain::test::write_bytes(log, std::vector<char>{'a'});
  BOOST_TEST(chosen({}) == (dir / "run_2.csv").string());
  ptrain::test::write_bytes(dir / "run_2.csv", std::vector<char>{'b'});
  BOOST_TEST(chosen({}) == (dir / "run_3.csv").string());
  // Named on the command line, the file is the user's to overwrite.
  BOOST_TEST(chosen({"--csv", log}) == log);
  BOOST_TEST(chosen({"--csv", ""}) == "");
}

// A resumed run continues the newest run's log: NAME.csv, or the highest NAME_N.csv there is.
BOOST_AUTO_TEST_CASE(a_resumed_run_continues_the_newest_default_output) {
  const fs::path dir = ptrain::test::temp_dir("cli_resume_test");
  const std::string log = (dir / "run.csv").string();
  const auto chosen = [&](const std::vector<std::string>& args) {
    Cli cli("program", "a test");
    cli.output_option("--csv", log, "per-epoch log").switch_option("--resume", "continue");
    cli.read(args);
    return cli.str("--csv");
  };
  BOOST_TEST(chosen({"--resume"}) == log);
  ptrain::test::write_bytes(log, std::vector<char>{'a'});
  BOOST_TEST(chosen({"--resume"}) == log);
  ptrain::test::write_bytes(dir / "run_2.csv", std::vector<char>{'b'});
  BOOST_TEST(chosen({"--resume"}) == (dir / "run_2.csv").string());
  BOOST_TEST(chosen({}) == (dir / "run_3.csv").string());
}

BOOST_AUTO_TEST_SUITE_END()
