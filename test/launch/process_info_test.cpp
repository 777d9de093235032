#include <cstdlib>
#include <map>
#include <string>

#include <boost/test/unit_test.hpp>

#include <ptrain/launch/process_info.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(process_info_test)

namespace {

using Env = std::map<std::string, std::string>;

ProcessInfo parse(const Env& env) {
  return process_info_from([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

bool message_has(const Env& env, const std::string& text) {
  try {
    parse(env);
  } catch (const Error& e) {
    return std::string(e.what()).find(text) != std::string::npos;
  }
  return false;
}

void check_info(const ProcessInfo& p, int rank, int size, int local_rank, int local_size, const std::string& launcher) {
  BOOST_TEST(p.rank == rank);
  BOOST_TEST(p.world_size == size);
  BOOST_TEST(p.local_rank == local_rank);
  BOOST_TEST(p.local_size == local_size);
  BOOST_TEST(p.launcher == launcher);
}

// A Slurm task of step 0 in a job of 5 tasks over nodes with 2, 2 and 1 tasks.
Env slurm_task(int rank, int node, int local) {
  return {{"SLURM_PROCID", std::to_string(rank)}, {"SLURM_NTASKS", "5"},        {"SLURM_STEP_NUM_TASKS", "5"},
          {"SLURM_LOCALID", std::to_string(local)}, {"SLURM_NODEID", std::to_string(node)},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x2),1"}, {"SLURM_TASKS_PER_NODE", "2(x2),1"},
          {"SLURM_STEP_ID", "0"},                   {"SLURM_JOB_ID", "42"}};
}

}  // namespace

BOOST_AUTO_TEST_CASE(no_launcher_means_a_single_process) {
  check_info(parse({}), 0, 1, 0, 1, "single");
  check_info(parse({{"HOME", "/root"}}), 0, 1, 0, 1, "single");
}

BOOST_AUTO_TEST_CASE(mpich_hydra_pmi_environment) {
  check_info(parse({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "1"}}), 2, 3,
             0, 1, "mpiexec");
  check_info(parse({{"PMI_RANK", "1"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}}), 1, 4,
             1, 2, "mpiexec");
  // Without the local variables: one process per node is assumed (MpiSession asks MPI instead).
  check_info(parse({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}), 1, 2, 0, 1, "mpiexec");
}

BOOST_AUTO_TEST_CASE(slurm_tasks_find_their_node_in_the_compressed_task_list) {
  check_info(parse(slurm_task(0, 0, 0)), 0, 5, 0, 2, "slurm");
  check_info(parse(slurm_task(3, 1, 1)), 3, 5, 1, 2, "slurm");
  check_info(parse(slurm_task(4, 2, 0)), 4, 5, 0, 1, "slurm");
  Env only_ntasks_per_node = {{"SLURM_PROCID", "1"},  {"SLURM_NTASKS", "4"},          {"SLURM_LOCALID", "1"},
                              {"SLURM_STEPID", "3"}, {"SLURM_NTASKS_PER_NODE", "2"}};
  check_info(parse(only_ntasks_per_node), 1, 4, 1, 2, "slurm");
  Env plain_list = {{"SLURM_PROCID", "2"},  {"SLURM_NTASKS", "3"},  {"SLURM_LOCALID", "0"},
                    {"SLURM_STEP_ID", "0"}, {"SLURM_NODEID", "1"}, {"SLURM_TASKS_PER_NODE", "2,1"}};
  check_info(parse(plain_list), 2, 3, 0, 1, "slurm");
}

// The environments below are the ones Slurm 22.05 and MPICH 4.0 produced for a job of 2 tasks
// on one node (sbatch -n 2 on the testbed of ../shared/testbed), cut to the variables read.

BOOST_AUTO_TEST_CASE(the_batch_script_itself_is_a_single_process) {
  // A program started directly by the batch script sees the job's SLURM_NTASKS=2 and
  // SLURM_PROCID=0, but no step: it is alone, not rank 0 of 2.
  Env batch = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},          {"SLURM_LOCALID", "0"},
               {"SLURM_NODEID", "0"}, {"SLURM_TASKS_PER_NODE", "2"}, {"SLURM_JOB_ID", "3"}};
  check_info(parse(batch), 0, 1, 0, 1, "single");
}

BOOST_AUTO_TEST_CASE(pmi_wins_over_the_slurm_variables_that_mpiexec_inherits) {
  // mpiexec inside the allocation: hydra starts its proxy as a one-task step, whose SLURM_*
  // variables every rank inherits.
  Env inherited = {{"SLURM_PROCID", "0"},    {"SLURM_NTASKS", "2"},     {"SLURM_STEP_NUM_TASKS", "1"},
                   {"SLURM_STEP_ID", "0"},   {"SLURM_LOCALID", "0"},    {"SLURM_NODEID", "0"},
                   {"SLURM_STEP_TASKS_PER_NODE", "1"}, {"SLURM_TASKS_PER_NODE", "1"},
                   {"PMI_RANK", "1"},        {"PMI_SIZE", "2"},         {"MPI_LOCALRANKID", "1"},
                   {"MPI_LOCALNRANKS", "2"}};
  check_info(parse(inherited), 1, 2, 1, 2, "mpiexec");
  // srun --mpi=pmi2: PMI and Slurm agree; the node-local rank comes from Slurm.
  Env srun_pmi2 = {{"SLURM_PROCID", "1"},  {"SLURM_NTASKS", "2"},   {"SLURM_STEP_NUM_TASKS", "2"},
                   {"SLURM_STEP_ID", "1"}, {"SLURM_STEPID", "1"},   {"SLURM_LOCALID", "1"},
                   {"SLURM_NODEID", "0"},  {"SLURM_STEP_TASKS_PER_NODE", "2"}, {"SLURM_TASKS_PER_NODE", "2"},
                   {"PMI_RANK", "1"},      {"PMI_SIZE", "2"}};
  check_info(parse(srun_pmi2), 1, 2, 1, 2, "slurm");
  // srun without a PMI for MPICH: Slurm alone says who is who (MpiSession then finds MPI
  // disagreeing, and says to use --mpi=pmi2).
  srun_pmi2.erase("PMI_RANK");
  srun_pmi2.erase("PMI_SIZE");
  check_info(parse(srun_pmi2), 1, 2, 1, 2, "slurm");
}

BOOST_AUTO_TEST_CASE(malformed_or_inconsistent_values_name_the_variable) {
  BOOST_TEST(message_has({{"PMI_RANK", "one"}, {"PMI_SIZE", "2"}},
                         "environment variable PMI_RANK='one' is not a non-negative integer"));
  BOOST_TEST(message_has({{"PMI_RANK", "-1"}, {"PMI_SIZE", "2"}}, "PMI_RANK='-1'"));
  BOOST_TEST(message_has({{"PMI_RANK", ""}, {"PMI_SIZE", "2"}}, "PMI_RANK=''"));
  BOOST_TEST(message_has({{"PMI_RANK", "0"}}, "PMI_RANK and PMI_SIZE must be set together"));
  BOOST_TEST(message_has({{"PMI_RANK", "2"}, {"PMI_SIZE", "2"}}, "rank 2 is not in [0, world size 2)"));
  BOOST_TEST(message_has({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "2"}, {"MPI_LOCALNRANKS", "2"}},
                         "local rank 2 of 2"));
  Env bad_list = slurm_task(0, 3, 0);
  BOOST_TEST(message_has(bad_list, "SLURM_STEP_TASKS_PER_NODE='2(x2),1' lists 3 nodes but SLURM_NODEID is 3"));
  Env malformed = slurm_task(0, 0, 0);
  malformed["SLURM_STEP_TASKS_PER_NODE"] = "2(x2";
  BOOST_TEST(message_has(malformed, "malformed item '2(x2'"));
  Env no_count = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}, {"SLURM_STEP_ID", "0"}};
  BOOST_TEST(message_has(no_count, "cannot tell how many tasks share this node"));
}

BOOST_AUTO_TEST_CASE(detect_reads_this_processs_environment) {
  // ctest may itself run under a launcher: start from a clean slate and restore nothing that
  // another test of this process reads.
  for (const char* name : {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "SLURM_PROCID", "SLURM_NTASKS",
                           "SLURM_STEP_NUM_TASKS", "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_LOCALID"})
    ::unsetenv(name);
  check_info(detect_process_info(), 0, 1, 0, 1, "single");
  ::setenv("PMI_RANK", "1", 1);
  ::setenv("PMI_SIZE", "2", 1);
  ::setenv("MPI_LOCALRANKID", "1", 1);
  ::setenv("MPI_LOCALNRANKS", "2", 1);
  check_info(detect_process_info(), 1, 2, 1, 2, "mpiexec");
  for (const char* name : {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"}) ::unsetenv(name);
}

BOOST_AUTO_TEST_SUITE_END()
