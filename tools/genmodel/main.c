/* mf-genmodel placeholder until the generator lands. */
#include <stdio.h>
int main(void) {
    fprintf(stderr, "mf-genmodel: not implemented yet\n");
    return 1;
}
