/* The program topology/meson.build links with one layer, whole, and the
 * layers below it: it runs nothing; that it links is the check. */
int main(void);

int
main(void)
{
  return 0;
}
