#define BOOST_TEST_MODULE ptrain
#include <boost/test/unit_test.hpp>

#include "common/source_dir.hpp"

const char* ptrain::test::test_source_dir() { return PTRAIN_TEST_SOURCE_DIR; }
