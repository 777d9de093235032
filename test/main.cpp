#define BOOST_TEST_MODULE ptrain
#include <boost/test/unit_test.hpp>
